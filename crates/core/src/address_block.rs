//! Whether an address lies in a CIDR block, as every allowlist and balancer list here asks
//! it: an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as dual-stack sockets report peers)
//! is its IPv4 address, an IPv4-mapped block (`::ffff:10.0.0.0/104`) is the IPv4 block it
//! maps, and an IPv6 block holds an IPv4 address only through its mapped form.
//!
//! [`address_group`] is the key every per-address count uses (connection caps, requests in
//! flight): IPv6 peers grouped by a prefix.
//!
//! Blocks are [`ipnet::IpNet`] values; ipnet compares families strictly, so the mapped
//! forms are the only rule added here.

pub use ipnet::IpNet;
use ipnet::Ipv4Net;
use std::net::IpAddr;

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
