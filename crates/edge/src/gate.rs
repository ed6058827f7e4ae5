//! Admission at accept: a cap on the connections one address holds open
//! ([`PerIpLimit`]) and a cap on all of them ([`ConnectionGate`]).
//!
//! Both are taken right after `accept`, before a byte is read, and the per-IP cap is taken
//! first: an address at its cap is refused without touching the global count, so one
//! address can never hold every global permit. A refused socket is closed at once (the
//! caller drops it); waiting would only let the peer hold kernel resources longer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a connection was refused at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The peer's address already holds its cap of open connections.
    PerIp,
    /// The listener already holds its cap of open connections.
    Global,
}

/// Open connections per peer address, with a cap that can change while running.
#[derive(Debug)]
pub struct PerIpLimit {
    cap: AtomicUsize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerIpLimit {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(PerIpLimit {
            cap: AtomicUsize::new(cap),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A new cap applies to the next accept; open connections are never cut.
    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    pub fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// Counts one more connection from `ip`, or refuses it at the cap.
    pub fn try_open(self: &Arc<Self>, ip: IpAddr) -> Option<IpTicket> {
        let cap = self.cap();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= cap {
            if *count == 0 {
                open.remove(&ip);
            }
            return None;
        }
        *count += 1;
        Some(IpTicket {
            limit: Arc::clone(self),
            ip,
        })
    }

    /// Open connections from `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&ip).copied().unwrap_or(0)
    }

    /// Addresses with at least one open connection.
    pub fn addresses(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn close(&self, ip: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&ip);
            }
        }
    }
}

/// One open connection counted against its address; dropping it gives the slot back.
#[derive(Debug)]
pub struct IpTicket {
    limit: Arc<PerIpLimit>,
    ip: IpAddr,
}

impl Drop for IpTicket {
    fn drop(&mut self) {
        self.limit.close(self.ip);
    }
}

/// The per-IP cap and the global cap of one listener, taken in that order.
#[derive(Debug)]
pub struct ConnectionGate {
    per_ip: Arc<PerIpLimit>,
    cap: usize,
    open: Arc<AtomicUsize>,
}

impl ConnectionGate {
    pub fn new(max_connections: usize, max_connections_per_ip: usize) -> Self {
        ConnectionGate {
            per_ip: PerIpLimit::new(max_connections_per_ip),
            cap: max_connections,
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Admits a connection from `ip`: its address's slot first, then a global one.
    pub fn admit(&self, ip: IpAddr) -> Result<Admitted, Refused> {
        let ticket = self.per_ip.try_open(ip).ok_or(Refused::PerIp)?;
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.cap).then_some(open + 1)
            });
        if taken.is_err() {
            return Err(Refused::Global);
        }
        Ok(Admitted {
            _ticket: ticket,
            open: Arc::clone(&self.open),
        })
    }

    /// Open connections.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    pub fn per_ip(&self) -> &Arc<PerIpLimit> {
        &self.per_ip
    }
}

/// An admitted connection; dropping it frees both its slots.
#[derive(Debug)]
pub struct Admitted {
    _ticket: IpTicket,
    open: Arc<AtomicUsize>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_cannot_take_every_slot() {
        let gate = ConnectionGate::new(3, 2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let first = gate.admit(a).unwrap();
        let _second = gate.admit(a).unwrap();
        assert_eq!(gate.admit(a).unwrap_err(), Refused::PerIp);
        assert_eq!(gate.open(), 2, "a per-IP refusal takes no global slot");
        let _third = gate.admit(b).unwrap();
        assert_eq!(gate.admit(b).unwrap_err(), Refused::Global);
        assert_eq!(
            gate.per_ip().open_from(b),
            1,
            "a global refusal gives its slot back"
        );
        drop(first);
        assert_eq!(gate.per_ip().open_from(a), 1);
        assert_eq!(gate.open(), 2);
        gate.admit(b).unwrap();
    }

    #[test]
    fn the_per_ip_cap_changes_for_the_next_accept() {
        let limit = PerIpLimit::new(1);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let _one = limit.try_open(ip).unwrap();
        assert!(limit.try_open(ip).is_none());
        limit.set_cap(2);
        let _two = limit.try_open(ip).unwrap();
        limit.set_cap(0);
        assert!(limit.try_open(ip).is_none());
        drop(_one);
        drop(_two);
        assert_eq!(
            limit.addresses(),
            0,
            "no entry is left for a closed address"
        );
    }
}
