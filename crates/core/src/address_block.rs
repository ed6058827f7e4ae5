//! Whether an address lies in a CIDR block, as every allowlist and balancer list here asks
//! it: an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as dual-stack sockets report peers)
//! is its IPv4 address, an IPv4-mapped block (`::ffff:10.0.0.0/104`) is the IPv4 block it
//! maps, and an IPv6 block holds an IPv4 address only through its mapped form.
//!
//! [`address_group`] is the key every per-address count uses (connection caps, requests in
//! flight): IPv6 peers grouped by a prefix.
//!
//! [`is_internal_address`] is the one rule of what is never a vendor's public proxy: the
//! vendor list's host policy, the checker and the gateway's dial all ask it, so an address
//! one of them refuses none of them reaches. [`dial_address`] is the form a dialer
//! connects to, the same one the rule judged.
//!
//! Blocks are [`ipnet::IpNet`] values; ipnet compares families strictly, so the mapped
//! forms are the only rule added here.

pub use ipnet::IpNet;
use ipnet::Ipv4Net;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Blocks that are never a vendor's public proxy: this host, private networks (RFC 1918,
/// unique-local), CGNAT, link-local (cloud metadata at `169.254.169.254` included),
/// unspecified, and IPv6's IPv4-compatible form (deprecated, so no vendor publishes it)
/// and the local-use NAT64 prefix (an operator's own translator, which may reach inside).
const INTERNAL: &[IpNet] = &[
    v4([0, 0, 0, 0], 8),
    v4([10, 0, 0, 0], 8),
    v4([100, 64, 0, 0], 10),
    v4([127, 0, 0, 0], 8),
    v4([169, 254, 0, 0], 16),
    v4([172, 16, 0, 0], 12),
    v4([192, 168, 0, 0], 16),
    // `::`, `::1` and `::a.b.c.d`.
    v6([0, 0, 0], 96),
    v6([0xfc00, 0, 0], 7),
    v6([0xfe80, 0, 0], 10),
    v6([0x64, 0xff9b, 1], 48),
];

/// The well-known NAT64 prefix (`64:ff9b::/96`): an address in it reaches the IPv4
/// address in its last 32 bits, so that address is what the rule judges.
const NAT64: IpNet = v6([0x64, 0xff9b, 0], 96);

/// A block written as its four octets.
const fn v4([a, b, c, d]: [u8; 4], prefix: u8) -> IpNet {
    IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), prefix)
}

/// A block whose address starts with `head` and is zero after it.
const fn v6(head: [u16; 3], prefix: u8) -> IpNet {
    IpNet::new_assert(
        IpAddr::V6(Ipv6Addr::new(head[0], head[1], head[2], 0, 0, 0, 0, 0)),
        prefix,
    )
}

/// The block `net` stands for: an IPv4-mapped IPv6 block as the IPv4 block it maps, any
/// other block as it is.
pub fn canonical_block(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(net, IpNet::V4),
            None => net,
        },
        _ => net,
    }
}

/// Whether `ip` lies in `block` (the host bits of the block's address are ignored).
pub fn block_contains(block: IpNet, ip: IpAddr) -> bool {
    match (canonical_block(block), ip.to_canonical()) {
        (IpNet::V4(net), IpAddr::V4(ip)) => net.contains(&ip),
        (IpNet::V6(net), IpAddr::V6(ip)) => net.contains(&ip),
        (IpNet::V6(net), IpAddr::V4(ip)) => net.contains(&ip.to_ipv6_mapped()),
        (IpNet::V4(_), IpAddr::V6(_)) => false,
    }
}

/// Whether `ip` lies in `network`/`prefix` (a prefix longer than the family's holds only
/// the network address itself): [`block_contains`] for callers that keep the pair.
pub fn in_block(ip: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let max = if network.is_ipv4() { 32 } else { 128 };
    IpNet::new(network, prefix.min(max)).is_ok_and(|block| block_contains(block, ip))
}

/// Whether `ip` lies in any of `blocks` (`(network, prefix)` pairs, as balancer lists are
/// kept), by [`in_block`]'s rule.
pub fn in_any_block(ip: IpAddr, blocks: &[(IpAddr, u8)]) -> bool {
    blocks
        .iter()
        .any(|(network, prefix)| in_block(ip, *network, *prefix))
}

/// Whether `ip` lies in a block that is never a vendor's public proxy (loopback, private,
/// CGNAT, link-local, unspecified, IPv4-compatible IPv6, local-use NAT64). An IPv4-mapped
/// address is judged as its IPv4 address and a well-known NAT64 address as the IPv4
/// address it carries, since that is what a connection to it reaches.
pub fn is_internal_address(ip: IpAddr) -> bool {
    let ip = match dial_ip(ip) {
        IpAddr::V6(v6) if block_contains(NAT64, IpAddr::V6(v6)) => {
            let [.., a, b, c, d] = v6.octets();
            IpAddr::V4(Ipv4Addr::new(a, b, c, d))
        }
        ip => ip,
    };
    INTERNAL.iter().any(|block| block_contains(*block, ip))
}

/// The address a dialer connects to for `ip`: an IPv4-mapped IPv6 address as its IPv4
/// address (so the socket, the log and the rule all see one address), any other as it is.
pub fn dial_ip(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// [`dial_ip`] with the port.
pub fn dial_address(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(dial_ip(addr.ip()), addr.port())
}

/// The address a per-address count keys `ip` by: an IPv4 address (or its IPv4-mapped IPv6
/// form) as itself, an IPv6 address as the network of its first `ipv6_prefix` bits, since
/// one host usually holds a whole /64 and could otherwise count as millions of peers.
pub fn address_group(ip: IpAddr, ipv6_prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u32::from(ipv6_prefix.min(128));
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
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
    fn ipv6_peers_group_by_their_prefix_and_ipv4_by_address() {
        assert_eq!(
            address_group(ip("2001:db8:1:2:aaaa::1"), 64),
            address_group(ip("2001:db8:1:2:bbbb::9"), 64)
        );
        assert_eq!(
            address_group(ip("2001:db8:1:2:aaaa::1"), 64),
            ip("2001:db8:1:2::")
        );
        assert_ne!(
            address_group(ip("2001:db8:1:2::1"), 64),
            address_group(ip("2001:db8:1:3::1"), 64)
        );
        assert_eq!(address_group(ip("2001:db8::1"), 128), ip("2001:db8::1"));
        assert_eq!(address_group(ip("2001:db8::1"), 0), ip("::"));
        assert_eq!(address_group(ip("10.1.2.3"), 64), ip("10.1.2.3"));
        assert_eq!(address_group(ip("::ffff:10.1.2.3"), 64), ip("10.1.2.3"));
    }

    #[test]
    fn blocks_hold_their_family_and_mapped_forms() {
        assert!(in_block(ip("10.1.2.3"), ip("10.0.0.0"), 8));
        assert!(!in_block(ip("11.0.0.1"), ip("10.0.0.0"), 8));
        assert!(in_block(ip("::ffff:10.1.2.3"), ip("10.0.0.0"), 8));
        assert!(in_block(ip("10.1.2.3"), ip("::ffff:10.0.0.0"), 104));
        assert!(!in_block(ip("11.1.2.3"), ip("::ffff:10.0.0.0"), 104));
        assert!(
            in_block(ip("10.1.2.3"), ip("::ffff:0:0"), 96),
            "all IPv4, mapped"
        );
        assert!(in_block(ip("2001:db8::1"), ip("2001:db8::"), 32));
        assert!(!in_block(ip("2001:db9::1"), ip("2001:db8::"), 32));
        assert!(in_block(ip("198.51.100.1"), ip("0.0.0.0"), 0));
        assert!(!in_block(ip("::1"), ip("0.0.0.0"), 0));
        assert!(
            in_block(ip("10.0.0.1"), ip("::"), 0),
            "an IPv6 /0 holds mapped IPv4 too"
        );
        assert!(in_block(ip("192.0.2.7"), ip("192.0.2.7"), 32));
        assert!(!in_block(ip("192.0.2.8"), ip("192.0.2.7"), 32));
    }

    #[test]
    fn internal_addresses_in_every_form_are_internal() {
        for inside in [
            "127.0.0.1",
            "127.0.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "::",
            "::1",
            "::127.0.0.1",
            "::8.8.8.8",
            "fd00::1",
            "fc00::1",
            "fe80::1",
            "febf::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::ffff:0.0.0.0",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1::8.8.8.8",
        ] {
            assert!(is_internal_address(ip(inside)), "{inside}");
        }
        for outside in [
            "8.8.8.8",
            "203.0.113.9",
            "100.128.0.1",
            "172.32.0.1",
            "169.255.0.1",
            "1.0.0.0",
            "2001:db8::1",
            "2606:4700::1111",
            "fec0::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!is_internal_address(ip(outside)), "{outside}");
        }
    }

    #[test]
    fn a_dial_address_is_the_form_the_rule_judged() {
        let mapped: SocketAddr = "[::ffff:169.254.169.254]:80".parse().unwrap();
        assert_eq!(dial_address(mapped), "169.254.169.254:80".parse().unwrap());
        let plain: SocketAddr = "[2001:db8::1]:8080".parse().unwrap();
        assert_eq!(dial_address(plain), plain);
        assert_eq!(dial_ip(ip("10.0.0.1")), ip("10.0.0.1"));
    }

    #[test]
    fn a_mapped_block_is_the_ipv4_block_it_maps() {
        let net = |s: &str| s.parse::<IpNet>().unwrap();
        assert_eq!(
            canonical_block(net("::ffff:10.0.0.0/104")),
            net("10.0.0.0/8")
        );
        assert_eq!(canonical_block(net("::ffff:0:0/95")), net("::ffff:0:0/95"));
        assert_eq!(
            canonical_block(net("2001:db8::/104")),
            net("2001:db8::/104")
        );
    }
}
