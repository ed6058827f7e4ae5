//! Outgoing connections from a chosen exit address, and the allocator of exit addresses.
//!
//! Binding the outgoing socket to `exit_ip:0` before `connect` is what lets the origin
//! tell upstream proxies apart on one machine: the origin sees the exit as the peer.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use proxypool_proto::TargetAddr;
use tokio::net::{TcpSocket, TcpStream};

/// Connects to `target` from `exit_ip` (domains resolved here, IPv4 only, because the
/// exit is an IPv4 address).
pub(crate) async fn connect_from(exit_ip: Ipv4Addr, target: &TargetAddr) -> io::Result<TcpStream> {
    let addr = match target {
        TargetAddr::Ip(SocketAddr::V4(v4)) => SocketAddr::V4(*v4),
        TargetAddr::Ip(SocketAddr::V6(_)) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "IPv6 target through an IPv4 exit",
            ));
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
    stream.set_nodelay(true)?;
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
