//! CIDR blocks as the file writes them (`10.0.0.0/8`, `2001:db8::/32`, or a bare address
//! for one host), parsed into [`IpNet`] values: the one parser of every block list
//! (balancers, client allowlists, destination ranges, vendor hosts), and [`Cidrs`], the
//! parsed list the components match addresses against.
//!
//! A block may have host bits set (`10.0.0.1/8` holds what `10.0.0.0/8` holds), and an
//! IPv4-mapped block (`::ffff:10.0.0.0/104`) is kept as the IPv4 block it maps; matching
//! follows [`proxypool_core::block_contains`] (IPv4-mapped addresses are their IPv4 form).
//! The address and the prefix are split here, not by `IpNet`'s own parser, because a bare
//! address is a one-host block and each message quotes the entry as written.

use crate::check::Check;
use proxypool_core::{IpNet, block_contains, canonical_block};
use std::net::IpAddr;

/// Parses `addr/prefix`, or a bare address as a one-host block.
pub fn parse_block(text: &str) -> Result<IpNet, String> {
    let (addr, prefix) = match text.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text, None),
    };
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{text:?} is not an IP address or CIDR block"))?;
    let invalid_prefix = || format!("{text:?} has an invalid prefix length");
    let prefix = match prefix {
        None if addr.is_ipv4() => 32,
        None => 128,
        Some(prefix) => prefix.parse::<u8>().map_err(|_| invalid_prefix())?,
    };
    IpNet::new(addr, prefix)
        .map(canonical_block)
        .map_err(|_| invalid_prefix())
}

/// [`parse_block`] as an (address, prefix length) pair, for callers that keep the pair.
pub fn parse_cidr(text: &str) -> Result<(IpAddr, u8), String> {
    parse_block(text).map(|block| (block.addr(), block.prefix_len()))
}

/// The pairs of a list of a loaded configuration (every entry was checked at load, so none
/// is dropped here), for callers that keep (address, prefix length) pairs.
pub fn parse_cidrs(list: &[String]) -> Vec<(IpAddr, u8)> {
    Cidrs::from_valid(list)
        .blocks()
        .iter()
        .map(|block| (block.addr(), block.prefix_len()))
        .collect()
}

/// A parsed list of blocks: a client's `ip_allowlist`, a `trusted_proxies` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cidrs(Vec<IpNet>);

impl Cidrs {
    /// Parses every entry; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(list: &[S]) -> Result<Self, String> {
        list.iter()
            .map(|entry| parse_block(entry.as_ref()))
            .collect::<Result<_, _>>()
            .map(Cidrs)
    }

    /// The blocks of a list of a loaded configuration (every entry was checked at load, so
    /// none is dropped here).
    pub fn from_valid(list: &[String]) -> Self {
        Cidrs(list.iter().filter_map(|e| parse_block(e).ok()).collect())
    }

    /// Whether `ip` lies in any block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|block| block_contains(*block, ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn blocks(&self) -> &[IpNet] {
        &self.0
    }
}

impl FromIterator<IpNet> for Cidrs {
    fn from_iter<I: IntoIterator<Item = IpNet>>(blocks: I) -> Self {
        Cidrs(blocks.into_iter().map(canonical_block).collect())
    }
}

/// Checks every entry of the block list at `key`, naming a bad one `key[i]`.
pub(crate) fn check_list(c: &mut Check<'_>, key: &str, list: &[String]) {
    for (i, entry) in list.iter().enumerate() {
        if let Err(message) = parse_block(entry) {
            c.at(format!("{key}[{i}]"), message);
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
    fn blocks_hosts_and_mapped_blocks_parse() {
        assert_eq!(parse_cidr("10.1.0.0/16"), Ok((ip("10.1.0.0"), 16)));
        assert_eq!(parse_cidr("::1"), Ok((ip("::1"), 128)));
        assert_eq!(parse_cidr("192.0.2.7"), Ok((ip("192.0.2.7"), 32)));
        // Host bits are kept, and ignored when matching.
        assert_eq!(parse_cidr("10.0.0.1/8"), Ok((ip("10.0.0.1"), 8)));
        assert_eq!(
            parse_block("::ffff:10.0.0.0/104"),
            parse_block("10.0.0.0/8"),
            "a mapped block is the IPv4 block it maps"
        );
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for text in ["banana", "10.0.0/8", "/8", ""] {
            assert_eq!(
                parse_cidr(text),
                Err(format!("{text:?} is not an IP address or CIDR block"))
            );
        }
        for text in ["10.0.0.0/33", "10.0.0.0/x", "10.0.0.0/", "::1/129", "::/-1"] {
            assert_eq!(
                parse_cidr(text),
                Err(format!("{text:?} has an invalid prefix length"))
            );
        }
    }

    #[test]
    fn a_list_matches_any_block_and_mapped_addresses() {
        let list = Cidrs::parse(&["10.0.0.0/8", "2001:db8::/32"]).unwrap();
        assert!(list.contains(ip("10.9.9.9")));
        assert!(list.contains(ip("::ffff:10.1.2.3")));
        assert!(list.contains(ip("2001:db8:1::5")));
        assert!(!list.contains(ip("11.0.0.1")));
        assert!(!Cidrs::default().contains(ip("10.0.0.1")));
        assert_eq!(
            Cidrs::parse(&["10.0.0.0/8", "nope"]),
            Err("\"nope\" is not an IP address or CIDR block".to_owned())
        );
        let from_load = Cidrs::from_valid(&["10.0.0.0/8".to_owned()]);
        assert_eq!(from_load.blocks(), list.blocks()[..1].to_vec().as_slice());
    }
}
