//! Client addresses as limiter keys.
//!
//! The port is never part of a key, so a client cannot dodge a limit by reconnecting. IPv4 is
//! stored in its IPv4-mapped IPv6 form so both families share one 128-bit layout, and a
//! v4-mapped IPv6 peer (`::ffff:a.b.c.d`, as dual-stack sockets report IPv4 clients) is the
//! same key as the plain IPv4 address. IPv6 clients are grouped by prefix (default /64, the
//! usual end-site allocation) so one host cannot rotate through its own addresses.

use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How many leading bits of a client address identify the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AddressAggregation {
    /// Prefix length for IPv4 clients (32 = one key per address).
    pub ipv4_prefix: u8,
    /// Prefix length for IPv6 clients (64 = one key per /64 network; 128 = per address).
    pub ipv6_prefix: u8,
}

impl Default for AddressAggregation {
    fn default() -> Self {
        Self {
            ipv4_prefix: 32,
            ipv6_prefix: 64,
        }
    }
}

impl AddressAggregation {
    /// Rejects prefixes longer than the address.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ipv4_prefix > 32 {
            return Err(ConfigError::PrefixLength {
                setting: "ipv4_prefix",
                value: self.ipv4_prefix,
                max: 32,
            });
        }
        if self.ipv6_prefix > 128 {
            return Err(ConfigError::PrefixLength {
                setting: "ipv6_prefix",
                value: self.ipv6_prefix,
                max: 128,
            });
        }
        Ok(())
    }
}

/// The IPv4-mapped IPv6 prefix `::ffff:0:0/96`, as the upper bits of a 128-bit address.
const V4_MAPPED_TAG: u128 = 0xffff_u128 << 32;

/// A client address after prefix aggregation, in a compact 128-bit form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientAddr {
    // Two u64 halves rather than one u128: u128 is 16-byte aligned and would pad the key.
    high: u64,
    low: u64,
}

impl ClientAddr {
    /// The key for `ip` under `aggregation`. Pass a `SocketAddr`'s `ip()`: never the port.
    pub fn from_ip(ip: IpAddr, aggregation: AddressAggregation) -> Self {
        Self::from_ip_masked(ip, PrefixMasks::new(aggregation))
    }

    /// The same with the masks computed ahead (the engine keeps them).
    #[inline]
    pub(crate) fn from_ip_masked(ip: IpAddr, masks: PrefixMasks) -> Self {
        let bits = match ip.to_canonical() {
            IpAddr::V4(v4) => V4_MAPPED_TAG | u128::from(u32::from(v4) & masks.ipv4),
            IpAddr::V6(v6) => u128::from(v6) & masks.ipv6,
        };
        Self::from_bits(bits)
    }

    fn from_bits(bits: u128) -> Self {
        Self {
            high: (bits >> 64) as u64,
            low: bits as u64,
        }
    }

    pub(crate) fn bits(&self) -> u128 {
        (u128::from(self.high) << 64) | u128::from(self.low)
    }

    pub(crate) fn high(&self) -> u64 {
        self.high
    }

    pub(crate) fn low(&self) -> u64 {
        self.low
    }

    /// The (masked) address this key stands for.
    pub fn to_ip(&self) -> IpAddr {
        let bits = self.bits();
        if bits >> 32 == V4_MAPPED_TAG >> 32 {
            IpAddr::V4(Ipv4Addr::from(bits as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    }

    /// The key as text with its prefix, e.g. `203.0.113.7` or `2001:db8:1:2::/64`.
    pub fn display(&self, aggregation: AddressAggregation) -> String {
        let ip = self.to_ip();
        let prefix = match ip {
            IpAddr::V4(_) => aggregation.ipv4_prefix,
            IpAddr::V6(_) => aggregation.ipv6_prefix,
        };
        let full_width = if ip.is_ipv4() { 32 } else { 128 };
        if prefix == full_width {
            ip.to_string()
        } else {
            format!("{ip}/{prefix}")
        }
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_ip())
    }
}

/// An [`AddressAggregation`] turned into bit masks once, instead of on every check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrefixMasks {
    ipv4: u32,
    ipv6: u128,
}

impl PrefixMasks {
    pub(crate) fn new(aggregation: AddressAggregation) -> Self {
        Self {
            ipv4: prefix_mask_u32(aggregation.ipv4_prefix),
            ipv6: prefix_mask_u128(aggregation.ipv6_prefix),
        }
    }
}

fn prefix_mask_u32(prefix: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

fn prefix_mask_u128(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str) -> ClientAddr {
        ClientAddr::from_ip(ip.parse().unwrap(), AddressAggregation::default())
    }

    #[test]
    fn ipv6_hosts_in_one_slash_64_share_a_key() {
        assert_eq!(
            key("2001:db8:1:2::1"),
            key("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(
            key("2001:db8:1:2::99").display(AddressAggregation::default()),
            "2001:db8:1:2::/64"
        );
    }

    #[test]
    fn ipv4_keeps_full_address_and_matches_its_mapped_form() {
        assert_ne!(key("203.0.113.7"), key("203.0.113.8"));
        assert_eq!(key("203.0.113.7"), key("::ffff:203.0.113.7"));
        assert_eq!(
            key("203.0.113.7").to_ip(),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            key("203.0.113.7").display(AddressAggregation::default()),
            "203.0.113.7"
        );
    }

    #[test]
    fn ipv4_and_ipv6_never_collide() {
        // ::cb00:7107 holds the same low 32 bits as 203.0.113.7 but is not v4-mapped.
        let aggregation = AddressAggregation {
            ipv4_prefix: 32,
            ipv6_prefix: 128,
        };
        let v4 = ClientAddr::from_ip("203.0.113.7".parse().unwrap(), aggregation);
        let v6 = ClientAddr::from_ip("::cb00:7107".parse().unwrap(), aggregation);
        assert_ne!(v4, v6);
    }

    #[test]
    fn prefixes_are_configurable_and_validated() {
        let per_address = AddressAggregation {
            ipv4_prefix: 24,
            ipv6_prefix: 128,
        };
        let a = ClientAddr::from_ip("2001:db8::1".parse().unwrap(), per_address);
        let b = ClientAddr::from_ip("2001:db8::2".parse().unwrap(), per_address);
        assert_ne!(a, b);
        let c = ClientAddr::from_ip("198.51.100.1".parse().unwrap(), per_address);
        let d = ClientAddr::from_ip("198.51.100.200".parse().unwrap(), per_address);
        assert_eq!(c, d);
        assert_eq!(c.display(per_address), "198.51.100.0/24");
        assert!(
            AddressAggregation {
                ipv4_prefix: 33,
                ipv6_prefix: 64
            }
            .validate()
            .is_err()
        );
        assert!(
            AddressAggregation {
                ipv4_prefix: 32,
                ipv6_prefix: 129
            }
            .validate()
            .is_err()
        );
        assert_eq!(prefix_mask_u32(0), 0);
        assert_eq!(prefix_mask_u128(128), u128::MAX);
    }
}
