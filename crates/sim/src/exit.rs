//! Outgoing connections from a chosen exit address, and the allocator of exit addresses.
//!
//! Binding the outgoing socket to `exit_ip:0` before `connect` is what lets the origin
//! tell upstream proxies apart on one machine: the origin sees the exit as the peer.
//!
//! Names under [`SIM_SUFFIX`] (`.test`, reserved for testing by RFC 6761, so never a real
//! site) resolve to loopback here, without asking the system resolver: that is how tests
//! and `dev` reach the origin under several host names of different registrable domains
//! (`shop-a.test:PORT`, `shop-b.test:PORT`). Only the simulated upstreams do this, as a
//! real vendor's proxy resolves names itself; the gateway never resolves names.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use proxypool_proto::TargetAddr;
use tokio::net::{TcpSocket, TcpStream};

/// The suffix of the names the simulated upstreams resolve to `127.0.0.1`.
pub const SIM_SUFFIX: &str = "test";

/// `127.0.0.1` for a name under [`SIM_SUFFIX`] (any case, trailing dot allowed).
pub(crate) fn sim_name(host: &str) -> Option<Ipv4Addr> {
    let host = host.trim_end_matches('.');
    let (_, last) = host.rsplit_once('.')?;
    last.eq_ignore_ascii_case(SIM_SUFFIX)
        .then_some(Ipv4Addr::LOCALHOST)
}

/// Connects to `target` from `exit_ip` (domains resolved here, IPv4 only, because the
/// exit is an IPv4 address; names under [`SIM_SUFFIX`] are loopback).
pub(crate) async fn connect_from(exit_ip: Ipv4Addr, target: &TargetAddr) -> io::Result<TcpStream> {
    let addr = match target {
        TargetAddr::Ip(SocketAddr::V4(v4)) => SocketAddr::V4(*v4),
        TargetAddr::Ip(SocketAddr::V6(_)) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "IPv6 target through an IPv4 exit",
            ));
        }
        TargetAddr::Domain(host, port) if sim_name(host).is_some() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), *port)
        }
        TargetAddr::Domain(host, port) => tokio::net::lookup_host((host.as_str(), *port))
            .await?
            .find(SocketAddr::is_ipv4)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::HostUnreachable, "no IPv4 address for host")
            })?,
    };
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(exit_ip), 0))?;
    let stream = socket.connect(addr).await?;
    // The connection is made: a target that already reset it shows in the relay, as it
    // would through a real proxy, not as a failed connect.
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Hands out loopback exit addresses in order from a first one, skipping addresses in
/// use, `127.0.0.1` (that is what "direct" traffic looks like) and `.0`/`.255` octets.
#[derive(Debug)]
pub(crate) struct ExitAllocator {
    next: u32,
}

const LOOPBACK_FIRST: u32 = u32::from_be_bytes([127, 0, 0, 2]);
const LOOPBACK_LAST: u32 = u32::from_be_bytes([127, 255, 255, 254]);

impl ExitAllocator {
    pub(crate) fn new(first: Ipv4Addr) -> Self {
        let first = u32::from(first);
        let next = if (LOOPBACK_FIRST..=LOOPBACK_LAST).contains(&first) {
            first
        } else {
            LOOPBACK_FIRST
        };
        Self { next }
    }

    /// The next usable exit not in `in_use`.
    pub(crate) fn allocate(&mut self, in_use: &HashSet<Ipv4Addr>) -> Ipv4Addr {
        loop {
            let candidate = Ipv4Addr::from(self.next);
            self.next = if self.next >= LOOPBACK_LAST {
                LOOPBACK_FIRST
            } else {
                self.next + 1
            };
            let last = candidate.octets()[3];
            if last != 0 && last != 255 && !in_use.contains(&candidate) {
                return candidate;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_under_the_test_suffix_are_loopback() {
        for name in ["shop-a.test", "WWW.Shop-B.TEST.", "a.b.test"] {
            assert_eq!(sim_name(name), Some(Ipv4Addr::LOCALHOST), "{name}");
        }
        for name in ["test", "shop.testing", "example.com", "test.example", ""] {
            assert_eq!(sim_name(name), None, "{name}");
        }
    }

    #[test]
    fn allocates_in_order_skipping_used_and_edges() {
        let mut exits = ExitAllocator::new(Ipv4Addr::new(127, 0, 0, 253));
        let in_use = HashSet::from([Ipv4Addr::new(127, 0, 1, 1)]);
        let got: Vec<Ipv4Addr> = (0..3).map(|_| exits.allocate(&in_use)).collect();
        assert_eq!(
            got,
            [
                Ipv4Addr::new(127, 0, 0, 253),
                Ipv4Addr::new(127, 0, 0, 254),
                Ipv4Addr::new(127, 0, 1, 2),
            ]
        );
        let mut wrap = ExitAllocator::new(Ipv4Addr::new(127, 255, 255, 254));
        wrap.allocate(&HashSet::new());
        assert_eq!(wrap.allocate(&HashSet::new()), Ipv4Addr::new(127, 0, 0, 2));
        let mut outside = ExitAllocator::new(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(
            outside.allocate(&HashSet::new()),
            Ipv4Addr::new(127, 0, 0, 2)
        );
    }
}
