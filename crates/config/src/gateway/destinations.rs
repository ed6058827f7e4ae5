//! `[gateway.destinations]`: the destination policy, which targets the gateway forwards to
//! at all, checked before any upstream dial. By default it refuses IP-literal targets in
//! loopback, private, link-local, CGNAT, multicast and unspecified ranges (IPv4-mapped IPv6
//! forms included) and ports other than 80, 443, 8080 and 8443. A target given as a name is
//! resolved by the upstream proxy, so only its port can be checked here. With its checks; a
//! client's `allowed_ports` is checked by the same rule.

use crate::check::Check;
use crate::cidr;
use proxypool_core::PortSet;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// `[gateway.destinations]`: the destination policy, checked before any upstream dial.
///
/// An IP-literal target is refused when it lies in a `deny_cidrs` block, or in one of the
/// built-in ranges (loopback, RFC 1918 and ULA private, link-local, CGNAT, multicast,
/// unspecified; IPv4-mapped IPv6 forms too) and in no `allow_cidrs` block. `deny_cidrs`
/// always wins over `allow_cidrs`. Every target, IP or name, must have a port in `ports`
/// (or in the client's `allowed_ports`, which replaces it). Names are resolved by the
/// upstream proxy, never by the gateway, so the address ranges cannot apply to them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Destinations {
    /// Blocks lifted out of the built-in denied ranges (`127.0.0.1/32`, `10.1.0.0/16`).
    pub allow_cidrs: Vec<String>,
    /// Blocks refused besides the built-in ranges, even if `allow_cidrs` lists them.
    pub deny_cidrs: Vec<String>,
    /// Allowed destination ports: a non-empty list, or `"*"` for any port (default 80,
    /// 443, 8080, 8443: [`PortSet::default`]).
    pub ports: PortSet,
}

impl Destinations {
    /// Lets exactly `origin` through: its address as a one-host block in `allow_cidrs` and
    /// its port added to `ports` (unless any port is allowed). For a local origin in
    /// development and tests (`proxypool dev`'s simulated origin); the rest of the policy
    /// stays as it is.
    pub fn allow_origin(&mut self, origin: SocketAddr) {
        let ip = origin.ip().to_canonical();
        let width = if ip.is_ipv4() { 32 } else { 128 };
        self.allow_cidrs.push(format!("{ip}/{width}"));
        if let PortSet::Only(ports) = &mut self.ports {
            ports.insert(origin.port());
        }
    }
}

/// Checks a port list at `key` (`ports`, a client's `allowed_ports`).
pub(crate) fn validate_ports(c: &mut Check<'_>, key: &str, ports: &PortSet) {
    if let PortSet::Only(list) = ports {
        if list.is_empty() {
            c.at(key, "must list at least one port, or be \"*\" for any port");
        }
        if list.contains(&0) {
            c.at(key, "port 0 is not a destination");
        }
    }
}

/// Checks `[gateway.destinations]`.
pub(crate) fn validate(c: &mut Check<'_>, destinations: &Destinations) {
    for (key, blocks) in [
        ("allow_cidrs", &destinations.allow_cidrs),
        ("deny_cidrs", &destinations.deny_cidrs),
    ] {
        cidr::check_list(c, &format!("gateway.destinations.{key}"), blocks);
    }
    validate_ports(c, "gateway.destinations.ports", &destinations.ports);
}
