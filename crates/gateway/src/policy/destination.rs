//! The destination policy: which targets clients may reach through the gateway at all,
//! checked after authentication and before any upstream proxy is picked or dialed, for
//! HTTP absolute-form requests, `CONNECT` and SOCKS5 alike.
//!
//! Without it a client could use any upstream proxy to reach what sits next to it or next
//! to the gateway: a cloud metadata service (`169.254.169.254`), Redis, the control API.
//! So by default an IP-literal target is refused when it lies in one of the built-in
//! ranges ([`builtin_range`]: loopback, private, link-local, CGNAT, multicast, unspecified,
//! broadcast and the deprecated IPv4-compatible IPv6 block; IPv4-mapped IPv6 forms such
//! as `::ffff:127.0.0.1` count as the IPv4 address). `allow_cidrs` lifts blocks out of the
//! built-in ranges; `deny_cidrs` refuses more and always wins. Every target must also have
//! a port in the allowed set: the client's `allowed_ports` when it has one, else the
//! gateway's `ports` (default 80, 443, 8080, 8443; `"*"` = any).
//!
//! **Names are not checked against the ranges.** The gateway never resolves a target
//! name: the upstream proxy does, on its side. A name that resolves to a private address
//! (`localhost`, a rebinding domain) is only held to the port list here.
//!
//! A refusal is [`Refusal::DestinationDenied`] (HTTP 403 `destination_denied`, SOCKS5 reply
//! 0x02) and is counted in `proxypool_gateway_destination_denials_total{reason}`. The
//! policy is part of the settings in force, so a reload applies it to the next request.

use crate::policy::cidr::Cidr;
use proxypool_config::gateway::Destinations;
use proxypool_core::PortSet;
use proxypool_proto::TargetAddr;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The ranges refused unless `allow_cidrs` lifts them, each with the name a refusal gives.
const BUILTIN: &[(&str, Cidr)] = &[
    ("unspecified", Cidr::v4(Ipv4Addr::new(0, 0, 0, 0), 8)),
    ("loopback", Cidr::v4(Ipv4Addr::new(127, 0, 0, 0), 8)),
    ("private", Cidr::v4(Ipv4Addr::new(10, 0, 0, 0), 8)),
    ("private", Cidr::v4(Ipv4Addr::new(172, 16, 0, 0), 12)),
    ("private", Cidr::v4(Ipv4Addr::new(192, 168, 0, 0), 16)),
    ("link_local", Cidr::v4(Ipv4Addr::new(169, 254, 0, 0), 16)),
    ("cgnat", Cidr::v4(Ipv4Addr::new(100, 64, 0, 0), 10)),
    ("multicast", Cidr::v4(Ipv4Addr::new(224, 0, 0, 0), 4)),
    ("broadcast", Cidr::v4(Ipv4Addr::new(255, 255, 255, 255), 32)),
    ("unspecified", Cidr::v6(Ipv6Addr::UNSPECIFIED, 128)),
    ("loopback", Cidr::v6(Ipv6Addr::LOCALHOST, 128)),
    // `::a.b.c.d`, deprecated (RFC 4291 §2.5.5.1); nothing public lives there.
    ("ipv4_compatible", Cidr::v6(Ipv6Addr::UNSPECIFIED, 96)),
    (
        "private",
        Cidr::v6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
    ),
    (
        "link_local",
        Cidr::v6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
    ),
    (
        "multicast",
        Cidr::v6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),
    ),
];

/// The built-in range `ip` lies in (`"loopback"`, `"private"`, ...), if any.
pub(crate) fn builtin_range(ip: IpAddr) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(_, block)| block.contains(ip))
        .map(|(name, _)| *name)
}

/// The compiled `[gateway.destinations]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationPolicy {
    settings: Destinations,
    allow: Vec<Cidr>,
    deny: Vec<Cidr>,
    /// A block that did not parse: the policy refuses every target (fail closed) and
    /// [`crate::GatewayConfig::validate`] refuses the settings.
    invalid: Option<String>,
}

impl Default for DestinationPolicy {
    fn default() -> Self {
        Self::new(&Destinations::default())
    }
}

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denied {
    /// The metric label: `port`, `deny_cidrs`, a built-in range's name or `invalid_policy`.
    pub reason: &'static str,
    message: String,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl DestinationPolicy {
    /// Compiles `settings` (the configuration checked the blocks at load; one that still
    /// does not parse leaves a policy that refuses everything).
    pub fn new(settings: &Destinations) -> Self {
        let mut invalid = None;
        let mut parse = |key: &str, blocks: &[String]| -> Vec<Cidr> {
            blocks
                .iter()
                .filter_map(|text| {
                    Cidr::parse(text)
                        .inspect_err(|error| {
                            invalid.get_or_insert_with(|| format!("destinations.{key}: {error}"));
                        })
                        .ok()
                })
                .collect()
        };
        let allow = parse("allow_cidrs", &settings.allow_cidrs);
        let deny = parse("deny_cidrs", &settings.deny_cidrs);
        DestinationPolicy {
            settings: settings.clone(),
            allow,
            deny,
            invalid,
        }
    }

    /// Lets exactly `origin` through as well (see [`Destinations::allow_origin`]).
    pub fn allow_origin(&mut self, origin: SocketAddr) {
        let mut settings = self.settings.clone();
        settings.allow_origin(origin);
        *self = Self::new(&settings);
    }

    /// The settings it was compiled from.
    pub fn settings(&self) -> &Destinations {
        &self.settings
    }

    /// Why these settings cannot be used, if they cannot.
    pub fn problem(&self) -> Option<&str> {
        self.invalid.as_deref()
    }

    /// Whether a client with `client_ports` (its override, if any) may reach `target`.
    pub(crate) fn check(
        &self,
        target: &TargetAddr,
        client_ports: Option<&PortSet>,
    ) -> Result<(), Denied> {
        if self.invalid.is_some() {
            return Err(Denied {
                reason: "invalid_policy",
                message: "the destination policy is invalid; refusing every target".into(),
            });
        }
        let port = target.port();
        let ports = client_ports.unwrap_or(&self.settings.ports);
        if !ports.contains(port) {
            return Err(Denied {
                reason: "port",
                message: format!("port {port} is not an allowed destination port"),
            });
        }
        let TargetAddr::Ip(addr) = target else {
            // A name: resolved by the upstream proxy, so only its port can be held here.
            return Ok(());
        };
        let ip = addr.ip();
        if self.deny.iter().any(|block| block.contains(ip)) {
            return Err(Denied {
                reason: "deny_cidrs",
                message: format!("{ip} is in a denied destination block"),
            });
        }
        if let Some(range) = builtin_range(ip)
            && !self.allow.iter().any(|block| block.contains(ip))
        {
            return Err(Denied {
                reason: range,
                message: format!("{ip} is a {} address", range.replace('_', "-")),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn target(text: &str) -> TargetAddr {
        text.parse().unwrap()
    }

    fn policy(allow: &[&str], deny: &[&str], ports: PortSet) -> DestinationPolicy {
        DestinationPolicy::new(&Destinations {
            allow_cidrs: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny_cidrs: deny.iter().map(|s| (*s).to_owned()).collect(),
            ports,
        })
    }

    #[test]
    fn ipv4_ranges_are_named_and_their_edges_hold() {
        for (address, range) in [
            ("127.0.0.1", Some("loopback")),
            ("127.255.255.255", Some("loopback")),
            ("10.0.0.1", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("172.15.255.255", None),
            ("192.168.1.1", Some("private")),
            ("192.169.0.1", None),
            ("169.254.169.254", Some("link_local")),
            ("100.64.0.1", Some("cgnat")),
            ("100.127.255.255", Some("cgnat")),
            ("100.128.0.1", None),
            ("224.0.0.1", Some("multicast")),
            ("239.255.255.255", Some("multicast")),
            ("0.0.0.0", Some("unspecified")),
            ("255.255.255.255", Some("broadcast")),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
        ] {
            assert_eq!(builtin_range(ip(address)), range, "{address}");
        }
    }

    #[test]
    fn ipv6_ranges_are_named_and_their_edges_hold() {
        for (address, range) in [
            ("::1", Some("loopback")),
            ("::", Some("unspecified")),
            ("fc00::1", Some("private")),
            ("fd12:3456::1", Some("private")),
            ("fe80::1", Some("link_local")),
            ("febf::1", Some("link_local")),
            ("fec0::1", None),
            ("ff02::1", Some("multicast")),
            ("::7f00:1", Some("ipv4_compatible")),
            ("2001:4860:4860::8888", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(builtin_range(ip(address)), range, "{address}");
        }
    }

    #[test]
    fn ipv4_mapped_forms_count_as_their_ipv4_address() {
        for (address, range) in [
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("link_local")),
            ("::ffff:10.1.2.3", Some("private")),
            ("::ffff:100.64.0.1", Some("cgnat")),
            ("::ffff:0.0.0.0", Some("unspecified")),
            ("::ffff:8.8.8.8", None),
        ] {
            assert_eq!(builtin_range(ip(address)), range, "{address}");
        }
        let defaults = DestinationPolicy::default();
        let denied = defaults
            .check(&target("[::ffff:127.0.0.1]:80"), None)
            .unwrap_err();
        assert_eq!(denied.reason, "loopback");
        // An allow entry written as IPv4 lifts the mapped form too, and the other way round.
        let allowed = policy(&["127.0.0.1"], &[], PortSet::default());
        allowed
            .check(&target("[::ffff:127.0.0.1]:80"), None)
            .unwrap();
        let allowed = policy(&["::ffff:169.254.0.0/112"], &[], PortSet::default());
        allowed.check(&target("169.254.169.254:80"), None).unwrap();
    }

    #[test]
    fn the_default_policy_refuses_internal_targets_and_odd_ports() {
        let policy = DestinationPolicy::default();
        for (text, reason) in [
            ("127.0.0.1:6379", "port"),
            ("127.0.0.1:80", "loopback"),
            ("169.254.169.254:80", "link_local"),
            ("[::1]:22", "port"),
            ("[::1]:443", "loopback"),
            ("10.0.0.5:8080", "private"),
            ("[fd00::1]:443", "private"),
            ("0.0.0.0:80", "unspecified"),
            ("93.184.216.34:22", "port"),
            ("example.com:6379", "port"),
        ] {
            assert_eq!(
                policy.check(&target(text), None).unwrap_err().reason,
                reason,
                "{text}"
            );
        }
        for text in [
            "93.184.216.34:443",
            "example.com:80",
            "[2606:4700::1111]:8443",
        ] {
            policy.check(&target(text), None).unwrap();
        }
        // A name is never resolved here: only its port is held.
        policy.check(&target("localhost:80"), None).unwrap();
    }

    #[test]
    fn allow_lifts_a_range_and_deny_wins() {
        let policy = policy(
            &["10.20.0.0/16", "127.0.0.1/32"],
            &["10.20.5.0/24", "203.0.113.0/24"],
            PortSet::default(),
        );
        policy.check(&target("10.20.1.1:80"), None).unwrap();
        policy.check(&target("127.0.0.1:443"), None).unwrap();
        assert_eq!(
            policy
                .check(&target("127.0.0.2:443"), None)
                .unwrap_err()
                .reason,
            "loopback"
        );
        assert_eq!(
            policy
                .check(&target("10.20.5.9:80"), None)
                .unwrap_err()
                .reason,
            "deny_cidrs"
        );
        assert_eq!(
            policy
                .check(&target("203.0.113.7:80"), None)
                .unwrap_err()
                .reason,
            "deny_cidrs"
        );
        // Allowing an address does not allow its ports.
        assert_eq!(
            policy
                .check(&target("127.0.0.1:6379"), None)
                .unwrap_err()
                .reason,
            "port"
        );
    }

    #[test]
    fn ports_any_and_a_client_override() {
        let any = policy(&[], &[], PortSet::Any);
        any.check(&target("93.184.216.34:22"), None).unwrap();
        assert_eq!(
            any.check(&target("127.0.0.1:22"), None).unwrap_err().reason,
            "loopback",
            "any port is not any address"
        );
        let defaults = DestinationPolicy::default();
        let ssh = PortSet::only([22]);
        defaults
            .check(&target("93.184.216.34:22"), Some(&ssh))
            .unwrap();
        assert_eq!(
            defaults
                .check(&target("93.184.216.34:443"), Some(&ssh))
                .unwrap_err()
                .reason,
            "port",
            "the override replaces the gateway's list"
        );
    }

    #[test]
    fn allowing_an_origin_lets_exactly_its_address_and_port_through() {
        let mut policy = DestinationPolicy::default();
        policy.allow_origin("127.0.0.1:45678".parse().unwrap());
        policy.check(&target("127.0.0.1:45678"), None).unwrap();
        policy.check(&target("127.0.0.1:80"), None).unwrap();
        assert_eq!(
            policy
                .check(&target("127.0.0.2:45678"), None)
                .unwrap_err()
                .reason,
            "loopback"
        );
        assert_eq!(
            policy
                .check(&target("127.0.0.1:6379"), None)
                .unwrap_err()
                .reason,
            "port"
        );
        assert_eq!(
            policy.settings().allow_cidrs,
            ["127.0.0.1/32"],
            "the settings say what was allowed"
        );
    }

    #[test]
    fn a_block_that_does_not_parse_refuses_everything() {
        let broken = policy(&["10.0.0.0/33"], &[], PortSet::Any);
        assert!(broken.problem().unwrap().contains("allow_cidrs"));
        assert_eq!(
            broken
                .check(&target("93.184.216.34:443"), None)
                .unwrap_err()
                .reason,
            "invalid_policy"
        );
        assert!(DestinationPolicy::default().problem().is_none());
    }
}
