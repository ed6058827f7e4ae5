//! CIDR blocks for per-client source IP allowlists and the destination policy
//! (`10.0.0.0/8`, `::1/128`, or a bare address): `ipnet` blocks parsed by the
//! configuration's one parser ([`proxypool_config::parse_block`]) and matched by the one
//! rule of [`proxypool_core::block_contains`]. IPv4-mapped IPv6 addresses
//! (`::ffff:127.0.0.1`, as dual-stack sockets report peers and as a client may write a
//! target) match IPv4 blocks, and an IPv4-mapped block (`::ffff:10.0.0.0/104`) is the IPv4
//! block it maps.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One parsed block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr(IpNet);

impl Cidr {
    /// Parses `addr/prefix` or a bare address (a single host).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        proxypool_config::parse_block(text.trim()).map(Cidr)
    }

    /// An IPv4 block (`prefix` at most 32, checked when the constant is built).
    pub(crate) const fn v4(network: Ipv4Addr, prefix: u8) -> Self {
        Cidr(IpNet::V4(Ipv4Net::new_assert(network, prefix)))
    }

    /// An IPv6 block (`prefix` at most 128, checked when the constant is built).
    pub(crate) const fn v6(network: Ipv6Addr, prefix: u8) -> Self {
        Cidr(IpNet::V6(Ipv6Net::new_assert(network, prefix)))
    }

    /// Whether `ip` lies in the block. An IPv4 block holds the IPv4-mapped IPv6 forms of
    /// its addresses; an IPv6 block sees an IPv4 address as its mapped form.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        proxypool_core::block_contains(self.0, ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn matches_blocks_and_hosts() {
        let block = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(block.contains(ip("10.1.200.3")));
        assert!(!block.contains(ip("10.2.0.1")));
        assert!(block.contains(ip("::ffff:10.1.0.9")), "v4-mapped peer");
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        let host = Cidr::parse("::1").unwrap();
        assert!(host.contains(ip("::1")));
        assert!(!host.contains(ip("127.0.0.1")));
        assert!(
            Cidr::parse("2001:db8::/32")
                .unwrap()
                .contains(ip("2001:db8:1::5"))
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("banana").is_err());
        assert!(Cidr::parse("10.0.0.0/x").is_err());
        assert!(
            Cidr::parse("10.0.0.0/").is_err(),
            "an empty prefix is no prefix"
        );
        assert!(Cidr::parse("::1/129").is_err());
    }

    #[test]
    fn mapped_blocks_and_addresses_meet_their_ipv4_forms() {
        let mapped = Cidr::parse("::ffff:10.0.0.0/104").unwrap();
        assert_eq!(mapped, Cidr::parse("10.0.0.0/8").unwrap());
        assert!(mapped.contains(ip("10.9.9.9")));
        assert!(mapped.contains(ip("::ffff:10.9.9.9")));
        assert!(!mapped.contains(ip("11.0.0.1")));
        // A wide IPv6 block that covers the mapped space sees IPv4 addresses in it.
        let wide = Cidr::parse("::ffff:0:0/95").unwrap();
        assert!(wide.contains(ip("127.0.0.1")));
        assert!(!Cidr::parse("fe80::/10").unwrap().contains(ip("127.0.0.1")));
    }
}
