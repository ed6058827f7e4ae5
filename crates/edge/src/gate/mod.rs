//! Admission at accept: a cap on the connections one address holds open
//! ([`PerIpLimit`], IPv6 counted per network) and a cap on all of them
//! ([`ConnectionCap`], which closes a silent or idle connection, never one that has begun
//! to speak, to admit a new one), combined for the scaffold's listeners in
//! [`ConnectionGate`].
//!
//! Both are taken right after `accept`, before a byte is read, and the per-address cap is
//! taken first: an address at its cap is refused without touching the global count, so one
//! address can never hold every global slot. A refused socket is closed at once (the caller
//! drops it); waiting would only let the peer hold kernel resources longer.
//!
//! Module map: `per_ip` ([`PerIpLimit`], [`IpTicket`]), `cap` ([`ConnectionCap`], the
//! choice of a connection to close, [`ConnectionMark`]).

mod cap;
mod per_ip;

pub use cap::{ConnectionCap, ConnectionMark, OpenConnection};
pub use per_ip::{IpTicket, PerIpLimit};

use std::net::IpAddr;
use std::sync::Arc;

/// Why a connection was refused at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The peer's address already holds its cap of open connections.
    PerIp,
    /// The listener holds its cap of open connections and every one of them is busy.
    Global,
}

/// The per-address cap and the global cap of one listener, taken in that order.
#[derive(Debug)]
pub struct ConnectionGate {
    per_ip: Arc<PerIpLimit>,
    cap: Arc<ConnectionCap>,
}

impl ConnectionGate {
    pub fn new(max_connections: usize, max_connections_per_ip: usize, ipv6_prefix: u8) -> Self {
        ConnectionGate {
            per_ip: PerIpLimit::new(max_connections_per_ip, ipv6_prefix),
            cap: ConnectionCap::new(max_connections),
        }
    }

    /// Admits a connection from `ip`: its address's slot first, then a global one.
    pub fn admit(&self, ip: IpAddr) -> Result<Admitted, Refused> {
        let ticket = self.per_ip.try_open(ip).ok_or(Refused::PerIp)?;
        let connection = self.cap.admit().ok_or(Refused::Global)?;
        Ok(Admitted::new(Some(ticket), connection))
    }

    /// Admits a connection that speaks for many clients (a trusted balancer that does not
    /// name them in a PROXY header): the global cap only, since counting the balancer as
    /// one address would shut out everyone behind it.
    pub fn admit_uncounted(&self) -> Result<Admitted, Refused> {
        let connection = self.cap.admit().ok_or(Refused::Global)?;
        Ok(Admitted::new(None, connection))
    }

    /// Open connections.
    pub fn open(&self) -> usize {
        self.cap.open()
    }

    pub fn per_ip(&self) -> &Arc<PerIpLimit> {
        &self.per_ip
    }
}

/// An admitted connection; dropping it frees both its slots. Listeners that take the two
/// caps apart (the gateway charges its shield in between) put it together with [`new`].
///
/// [`new`]: Admitted::new
#[derive(Debug)]
pub struct Admitted {
    _ticket: Option<IpTicket>,
    connection: OpenConnection,
}

impl Admitted {
    /// A connection holding its address's slot (`None`: not counted per address) and its
    /// global one.
    pub fn new(ticket: Option<IpTicket>, connection: OpenConnection) -> Self {
        Admitted {
            _ticket: ticket,
            connection,
        }
    }

    /// Whether another connection was closed to admit this one.
    pub fn made_room(&self) -> bool {
        self.connection.made_room()
    }

    /// What the connection tells the cap and hears from it.
    pub fn mark(&self) -> &Arc<ConnectionMark> {
        self.connection.mark()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_cannot_take_every_slot() {
        let gate = ConnectionGate::new(3, 2, 64);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let first = gate.admit(a).unwrap();
        let second = gate.admit(a).unwrap();
        assert_eq!(gate.admit(a).unwrap_err(), Refused::PerIp);
        assert_eq!(gate.open(), 2, "a per-IP refusal takes no global slot");
        let third = gate.admit(b).unwrap();
        for admitted in [&first, &second, &third] {
            admitted.mark().busy();
        }
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
    fn a_balancer_is_not_counted_as_one_address() {
        let gate = ConnectionGate::new(8, 1, 64);
        let balancer: IpAddr = "10.0.0.1".parse().unwrap();
        let _counted = gate.admit(balancer).unwrap();
        let _many: Vec<_> = (0..4).map(|_| gate.admit_uncounted().unwrap()).collect();
        assert_eq!(gate.per_ip().open_from(balancer), 1);
        assert_eq!(gate.open(), 5);
    }
}
