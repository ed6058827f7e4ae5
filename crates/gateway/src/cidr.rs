//! CIDR blocks for per-client source IP allowlists (`10.0.0.0/8`, `::1/128`, or a bare
//! address). IPv4-mapped IPv6 peers match IPv4 blocks, as dual-stack sockets report them.

use std::net::IpAddr;

/// One parsed block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `addr/prefix` or a bare address (a single host).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not an IP address or CIDR block"))?;
        let network = network.to_canonical();
        let width = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(prefix) => prefix
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= width)
                .ok_or_else(|| format!("'{text}' has a prefix outside 0..={width}"))?,
            None => width,
        };
        Ok(Self { network, prefix })
    }

    /// Whether `ip` lies in the block.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
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
    }
}
