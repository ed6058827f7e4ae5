//! [`PerIpLimit`]: the connections one address holds open, with a cap that can change
//! while the listener runs. IPv6 peers count per network ([`address_group`]), so one host
//! with a /64 cannot pass for millions of addresses.

use proxypool_core::address_group;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections per address (IPv6 per prefix), with a cap that can change while running.
#[derive(Debug)]
pub struct PerIpLimit {
    cap: AtomicUsize,
    ipv6_prefix: AtomicU8,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerIpLimit {
    /// A limit of `cap` connections per address, IPv6 counted per `ipv6_prefix` network.
    pub fn new(cap: usize, ipv6_prefix: u8) -> Arc<Self> {
        Arc::new(PerIpLimit {
            cap: AtomicUsize::new(cap),
            ipv6_prefix: AtomicU8::new(ipv6_prefix),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A new cap applies to the next accept; open connections are never cut.
    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// A new grouping applies to the next accept; an open connection keeps the key it was
    /// counted under until it closes.
    pub fn set_ipv6_prefix(&self, prefix: u8) {
        self.ipv6_prefix.store(prefix, Ordering::Relaxed);
    }

    pub fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// The key `ip` is counted under.
    pub fn key_of(&self, ip: IpAddr) -> IpAddr {
        address_group(ip, self.ipv6_prefix.load(Ordering::Relaxed))
    }

    /// Counts one more connection from `ip`, or refuses it at the cap.
    pub fn try_open(self: &Arc<Self>, ip: IpAddr) -> Option<IpTicket> {
        let cap = self.cap();
        let key = self.key_of(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key).or_insert(0);
        if *count >= cap {
            if *count == 0 {
                open.remove(&key);
            }
            return None;
        }
        *count += 1;
        Some(IpTicket {
            limit: Arc::clone(self),
            key,
        })
    }

    /// Open connections counted under `ip`'s key.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        let key = self.key_of(ip);
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&key).copied().unwrap_or(0)
    }

    /// Keys with at least one open connection.
    pub fn addresses(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn close(&self, key: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&key);
            }
        }
    }
}

/// One open connection counted against its address; dropping it gives the slot back.
#[derive(Debug)]
pub struct IpTicket {
    limit: Arc<PerIpLimit>,
    key: IpAddr,
}

impl Drop for IpTicket {
    fn drop(&mut self) {
        self.limit.close(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_per_ip_cap_changes_for_the_next_accept() {
        let limit = PerIpLimit::new(1, 64);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let one = limit.try_open(ip).unwrap();
        assert!(limit.try_open(ip).is_none());
        limit.set_cap(2);
        let two = limit.try_open(ip).unwrap();
        limit.set_cap(0);
        assert!(limit.try_open(ip).is_none());
        drop((one, two));
        assert_eq!(
            limit.addresses(),
            0,
            "no entry is left for a closed address"
        );
    }

    #[test]
    fn ipv6_addresses_of_one_network_share_one_count() {
        let limit = PerIpLimit::new(2, 64);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let _a = limit.try_open(ip("2001:db8:0:1::1")).unwrap();
        let _b = limit.try_open(ip("2001:db8:0:1::2")).unwrap();
        assert!(
            limit.try_open(ip("2001:db8:0:1:ffff::3")).is_none(),
            "a third address of the same /64 is over the cap"
        );
        let _c = limit.try_open(ip("2001:db8:0:2::1")).unwrap();
        limit.set_ipv6_prefix(128);
        let _d = limit.try_open(ip("2001:db8:0:1::3")).unwrap();
        drop((_a, _b));
        limit.set_ipv6_prefix(64);
        assert_eq!(
            limit.open_from(ip("2001:db8:0:1::9")),
            0,
            "a ticket gives back the key it was counted under"
        );
    }
}
