//! [`AddressSlots`]: the table behind the per-address cap on requests in flight, one count
//! per address (an IPv4-mapped address is its IPv4 address, an IPv6 address its network
//! of `ipv6_prefix` bits), kept apart from the middleware that reads it from the API's
//! state so the state can own one without importing the middleware.

use proxypool_throttle::{AddressAggregation, ClientAddr};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Requests in flight per address. Only addresses with a request in flight have an entry,
/// so the map is as large as the requests being served, never as the addresses seen.
#[derive(Debug)]
pub(crate) struct AddressSlots {
    cap: usize,
    aggregation: AddressAggregation,
    counts: Mutex<HashMap<ClientAddr, usize>>,
}

/// One request's place in its address's count, given back when dropped (the request
/// answered, failed or abandoned by its client).
#[derive(Debug)]
pub(crate) struct AddressSlot {
    slots: Arc<AddressSlots>,
    key: ClientAddr,
}

impl AddressSlots {
    pub(crate) fn new(cap: usize, ipv6_prefix: u8) -> Arc<AddressSlots> {
        Arc::new(AddressSlots {
            cap,
            aggregation: AddressAggregation {
                ipv4_prefix: 32,
                ipv6_prefix,
            },
            counts: Mutex::default(),
        })
    }

    /// A slot for `ip` (an IPv4-mapped address is its IPv4 address, an IPv6 address its
    /// network), or `None` when the address already has `cap` requests in flight.
    pub(crate) fn try_take(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let key = ClientAddr::from_ip(ip, self.aggregation);
        let mut counts = self.lock();
        if counts.get(&key).is_some_and(|count| *count >= self.cap) {
            return None;
        }
        *counts.entry(key).or_insert(0) += 1;
        Some(AddressSlot {
            slots: self.clone(),
            key,
        })
    }

    /// Addresses with a request in flight.
    #[cfg(test)]
    fn addresses(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClientAddr, usize>> {
        // The counts stay consistent whatever panicked while holding the lock: every
        // critical section is a single increment, decrement or removal.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.slots.lock();
        if let Some(count) = counts.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_cap_holds_per_address_and_frees_with_the_slot() {
        let slots = AddressSlots::new(2, 64);
        let a = slots.try_take(ip("203.0.113.7")).unwrap();
        let b = slots.try_take(ip("::ffff:203.0.113.7")).unwrap();
        assert!(
            slots.try_take(ip("203.0.113.7")).is_none(),
            "a mapped address is its IPv4 address"
        );
        let other = slots.try_take(ip("203.0.113.8")).unwrap();
        drop(a);
        let c = slots.try_take(ip("203.0.113.7")).unwrap();
        drop((b, c, other));
        assert_eq!(slots.addresses(), 0, "no entry outlives its requests");
    }

    #[test]
    fn ipv6_is_counted_per_network() {
        let slots = AddressSlots::new(1, 64);
        let _held = slots.try_take(ip("2001:db8:1:2::1")).unwrap();
        assert!(slots.try_take(ip("2001:db8:1:2::ffff")).is_none());
        assert!(slots.try_take(ip("2001:db8:1:3::1")).is_some());
        let per_host = AddressSlots::new(1, 128);
        let _held = per_host.try_take(ip("2001:db8:1:2::1")).unwrap();
        assert!(per_host.try_take(ip("2001:db8:1:2::2")).is_some());
    }
}
