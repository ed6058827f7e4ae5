//! Whether an address lies in a CIDR block, as every allowlist and balancer list here asks
//! it: an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as dual-stack sockets report peers)
//! is its IPv4 address, an IPv4-mapped block (`::ffff:10.0.0.0/104`) is the IPv4 block it
//! maps, and an IPv6 block holds an IPv4 address only through its mapped form.

use std::net::IpAddr;

/// Whether `ip` lies in `network`/`prefix` (a prefix longer than the family's holds only
/// the network address itself).
pub fn in_block(ip: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let (network, prefix) = match network {
        IpAddr::V6(v6) if prefix >= 96 => match v6.to_ipv4_mapped() {
            Some(v4) => (IpAddr::V4(v4), prefix - 96),
            None => (network, prefix),
        },
        _ => (network, prefix),
    };
    let ip = match (ip.to_canonical(), network) {
        (IpAddr::V4(v4), IpAddr::V6(_)) => IpAddr::V6(v4.to_ipv6_mapped()),
        (ip, _) => ip,
    };
    match (ip, network) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => {
            let mask = u32::MAX
                .checked_shl(32u32.saturating_sub(u32::from(prefix)))
                .unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) => {
            let mask = u128::MAX
                .checked_shl(128u32.saturating_sub(u32::from(prefix)))
                .unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
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
}
