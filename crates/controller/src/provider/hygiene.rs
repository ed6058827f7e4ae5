//! [`HostPolicy`]: which entries of a fetched vendor list are accepted, so a list altered
//! on the way (or by a compromised vendor endpoint) cannot point the checker and the
//! gateways at a host of the attacker's choosing with the vendor account's credentials.
//!
//! Two rules, for `http` providers only (a static list is written in our own file):
//!
//! - An entry that would get the upstream's default `credentials` (it has none of its own)
//!   must be on a host in `allowed_hosts`: a domain suffix (the name itself or any name
//!   under it) or a CIDR block. Otherwise it is refused whole, so the credentials are
//!   never attached to it.
//! - An entry on a loopback, private (RFC 1918, unique-local), CGNAT, link-local or
//!   unspecified address (IPv4-mapped forms and numeric forms like `2130706433` or
//!   `127.1` included), or named `localhost`, is refused unless `allow_private_hosts` is
//!   set: such a "proxy" would make the checker and the gateways connect into our own
//!   network.
//!
//! A name is judged by what it resolves to as well (`super::resolve`): an entry whose name
//! resolves to any internal address is refused before it is stored, and the checker
//! resolves again and connects only to an address it checked (`crate::checker::probe`),
//! so a name that changes its answer later still cannot lead the checker inside.
//!
//! Refused entries are counted by reason (`host_not_allowed`, `private_host`) with the
//! other dropped entries on the upstream's status (`GET /v1/upstreams`).

use crate::config::AllowedHost;
use proxypool_core::block_contains;
/// The one rule of internal addresses, shared with the checker and the gateway's dial.
pub use proxypool_core::is_internal_address;
use proxypool_proto::inet_aton_v4;
use std::net::IpAddr;

/// Why an entry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It would get the default credentials but its host is not in `allowed_hosts`.
    HostNotAllowed,
    /// It points into a loopback, private or link-local range.
    PrivateHost,
}

/// The entry rules of one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    allowed: Vec<AllowedHost>,
    allow_private: bool,
}

impl HostPolicy {
    /// From the (validated) `allowed_hosts` and `allow_private_hosts`.
    pub fn new(allowed_hosts: &[String], allow_private: bool) -> Self {
        let allowed = allowed_hosts
            .iter()
            .filter_map(|entry| AllowedHost::parse(entry.trim()).ok())
            .collect();
        HostPolicy {
            allowed,
            allow_private,
        }
    }

    /// Checks an entry on `host`; `defaulted` = it would get the upstream's credentials.
    pub fn check(&self, host: &str, defaulted: bool) -> Result<(), Refusal> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        // A numeric IPv4 form (`2130706433`) is judged as the address a dialer would reach.
        let ip = bare
            .parse::<IpAddr>()
            .ok()
            .or_else(|| inet_aton_v4(bare).map(IpAddr::V4));
        if !self.allow_private && is_internal(bare, ip) {
            return Err(Refusal::PrivateHost);
        }
        if defaulted && !self.allows(bare, ip) {
            return Err(Refusal::HostNotAllowed);
        }
        Ok(())
    }

    /// Whether entries on internal addresses are refused (so names must be resolved and
    /// their addresses checked before an entry is stored or dialed).
    pub fn refuses_internal(&self) -> bool {
        !self.allow_private
    }

    fn allows(&self, host: &str, ip: Option<IpAddr>) -> bool {
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        self.allowed.iter().any(|allowed| match (allowed, ip) {
            (AllowedHost::Block(block), Some(ip)) => block_contains(*block, ip),
            (AllowedHost::Suffix(suffix), None) => {
                name == *suffix
                    || name
                        .strip_suffix(suffix.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            }
            _ => false,
        })
    }
}

fn is_internal(host: &str, ip: Option<IpAddr>) -> bool {
    match ip {
        Some(ip) => is_internal_address(ip),
        None => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(hosts: &[&str], allow_private: bool) -> HostPolicy {
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        HostPolicy::new(&hosts, allow_private)
    }

    #[test]
    fn default_credentials_go_only_to_allowed_hosts() {
        let p = policy(
            &["vendor.example", "203.0.113.0/24", "*.edge.example"],
            false,
        );
        for host in [
            "vendor.example",
            "gw1.vendor.example",
            "VENDOR.example.",
            "203.0.113.9",
            "a.edge.example",
        ] {
            assert_eq!(p.check(host, true), Ok(()), "{host}");
        }
        for host in [
            "attacker.example",
            "evilvendor.example",
            "vendor.example.attacker.example",
            "198.51.100.1",
            "[2001:db8::1]",
            // 198.51.100.1 as one number: not a name under an allowed suffix either.
            "3325256705",
        ] {
            assert_eq!(p.check(host, true), Err(Refusal::HostNotAllowed), "{host}");
        }
        // An entry with credentials of its own may be anywhere public.
        assert_eq!(p.check("attacker.example", false), Ok(()));
    }

    #[test]
    fn internal_hosts_are_refused_unless_allowed() {
        let p = policy(&["0.0.0.0/0", "::/0", "localhost"], false);
        for host in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "[::1]",
            "[fd00::1]",
            "[fe80::1]",
            "[::ffff:127.0.0.1]",
            "localhost",
            "x.localhost",
            "2130706433",
            "0x7f000001",
            "0177.0.0.1",
            "127.1",
            "2852039166",
            "167772161",
        ] {
            assert_eq!(p.check(host, false), Err(Refusal::PrivateHost), "{host}");
        }
        assert_eq!(p.check("8.8.8.8", true), Ok(()));
        // 203.0.113.9 as one number is inside the allowed block.
        let vendor = policy(&["203.0.113.0/24"], false);
        assert_eq!(vendor.check("3405803785", true), Ok(()));
        let open = policy(&["127.0.0.0/8"], true);
        assert_eq!(open.check("127.0.0.5", true), Ok(()));
        assert_eq!(open.check("10.0.0.1", true), Err(Refusal::HostNotAllowed));
        assert_eq!(open.check("10.0.0.1", false), Ok(()));
    }
}
