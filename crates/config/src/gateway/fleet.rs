//! `[gateway.fleet]`: this gateway as a member of the fleet, the gateways that share sticky
//! sessions and rotation keys. With the table set the gateway opens a fleet listener
//! (`listen`) that serves requests other members relay to it over mutually pinned TLS, and
//! reports `advertise` (the address its peers dial) to the controller. Without it the
//! gateway keeps every key to itself, as before.
//!
//! Checked at load: `advertise` is a `host:port` (a DNS name or an IP, IPv6 in brackets,
//! a port), filled in from `listen` when left out, and required when `listen` is an
//! unspecified address (`0.0.0.0`, `[::]`), which no peer can dial; the timeouts and the
//! connection cap are in range. `listen` and `advertise` need a restart; the rest applies
//! on reload.

use crate::check::Check;
use crate::duration::Millis;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};

/// `[gateway.fleet]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// Where the fleet listener binds (restart).
    pub listen: SocketAddr,
    /// What peers dial to reach the fleet listener, `host:port`. Left out: `listen`, which
    /// must then be a specific address (restart).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub advertise: String,
    /// TCP connect timeout to a member.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Millis,
    /// How long a relaying gateway waits for the head of the owner's answer (connect and
    /// TLS included) before it counts the owner unreachable.
    #[serde(default = "default_hop_timeout")]
    pub hop_timeout: Millis,
    /// How long a member that failed a hop is left out of ownership locally.
    #[serde(default = "default_unreachable_for")]
    pub unreachable_for: Millis,
    /// The fleet listener's connection cap (also its per-address cap: members relay many
    /// clients over few addresses).
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// How long an idle pooled hop connection to a member is kept.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout: Millis,
}

/// The most connections `max_connections` may allow.
pub const MAX_FLEET_CONNECTIONS: usize = 1_000_000;

/// The longest `advertise` (a DNS name is at most 253 bytes, and a port follows).
pub const MAX_ADVERTISE_BYTES: usize = 255;

fn default_connect_timeout() -> Millis {
    Millis::from_secs(1)
}

fn default_hop_timeout() -> Millis {
    Millis::from_secs(3)
}

fn default_unreachable_for() -> Millis {
    Millis::from_secs(10)
}

fn default_max_connections() -> usize {
    4096
}

fn default_idle_timeout() -> Millis {
    Millis::from_secs(60)
}

impl FleetConfig {
    /// A member listening on `listen` with the default timeouts and cap (`advertise` =
    /// `listen`, so `listen` must be a specific address to be dialed).
    pub fn new(listen: SocketAddr) -> Self {
        FleetConfig {
            listen,
            advertise: listen.to_string(),
            connect_timeout: default_connect_timeout(),
            hop_timeout: default_hop_timeout(),
            unreachable_for: default_unreachable_for(),
            max_connections: default_max_connections(),
            idle_timeout: default_idle_timeout(),
        }
    }
}

/// Checks `[gateway.fleet]` and fills `advertise` in from `listen` when it is left out.
pub(crate) fn validate(c: &mut Check<'_>, fleet: &mut FleetConfig) {
    if fleet.advertise.is_empty() {
        if fleet.listen.ip().is_unspecified() {
            c.at(
                "gateway.fleet.advertise",
                format!(
                    "is required when listen is {} (an unspecified address no peer can dial): \
                     set the host:port the other gateways reach this one at",
                    fleet.listen
                ),
            );
        } else {
            fleet.advertise = fleet.listen.to_string();
        }
    } else if let Err(problem) = check_advertise(&fleet.advertise) {
        c.at("gateway.fleet.advertise", problem);
    }
    c.duration(
        "gateway.fleet.connect_timeout",
        fleet.connect_timeout,
        Millis(10),
        Millis::from_secs(60),
    );
    c.duration(
        "gateway.fleet.hop_timeout",
        fleet.hop_timeout,
        Millis(100),
        Millis::from_secs(300),
    );
    c.duration(
        "gateway.fleet.unreachable_for",
        fleet.unreachable_for,
        Millis::from_secs(1),
        Millis::from_secs(3600),
    );
    c.duration(
        "gateway.fleet.idle_timeout",
        fleet.idle_timeout,
        Millis::from_secs(1),
        Millis::from_secs(3600),
    );
    if !(1..=MAX_FLEET_CONNECTIONS).contains(&fleet.max_connections) {
        c.at(
            "gateway.fleet.max_connections",
            format!(
                "must be from 1 to {MAX_FLEET_CONNECTIONS}, not {}",
                fleet.max_connections
            ),
        );
    }
}

/// `host:port` with a port from 1 to 65535 and a host that is an IP (IPv6 in brackets)
/// or a DNS name: labels of letters, digits and `-`, 1 to 63 bytes, not starting or ending
/// with `-`.
fn check_advertise(advertise: &str) -> Result<(), String> {
    const FORM: &str =
        "must be host:port (a DNS name or an IP address, IPv6 in brackets, and a port)";
    if advertise.len() > MAX_ADVERTISE_BYTES {
        return Err(format!("must be at most {MAX_ADVERTISE_BYTES} bytes"));
    }
    let Some((host, port)) = advertise.rsplit_once(':') else {
        return Err(format!("{FORM}, not {advertise:?}: the port is missing"));
    };
    if !port.parse::<u16>().is_ok_and(|port| port != 0) {
        return Err(format!(
            "{FORM}, not {advertise:?}: the port must be from 1 to 65535"
        ));
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return match inner.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) if !ip.is_unspecified() => Ok(()),
            _ => Err(format!(
                "{FORM}, not {advertise:?}: [{inner}] is not a dialable IPv6 address"
            )),
        };
    }
    if host.contains(':') {
        return Err(format!(
            "{FORM}, not {advertise:?}: write an IPv6 address in brackets, [addr]:port"
        ));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return if ip.is_unspecified() {
            Err(format!(
                "{FORM}, not {advertise:?}: an unspecified address cannot be dialed"
            ))
        } else {
            Ok(())
        };
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(format!(
            "{FORM}, not {advertise:?}: {host:?} is neither a DNS name nor an IP address"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_advertise;

    #[test]
    fn advertise_takes_names_and_addresses_with_a_port() {
        for ok in [
            "gw-1.internal:9443",
            "10.0.0.7:9443",
            "[fd00::7]:9443",
            "gw.example.:1",
        ] {
            assert_eq!(check_advertise(ok), Ok(()), "{ok}");
        }
        for (bad, words) in [
            ("gw-1.internal", "port is missing"),
            ("gw-1.internal:0", "from 1 to 65535"),
            ("gw-1.internal:99999", "from 1 to 65535"),
            ("0.0.0.0:9443", "unspecified"),
            ("[::]:9443", "IPv6"),
            ("fd00::7:9443", "in brackets"),
            ("bad name:1", "neither"),
            ("-gw:1", "neither"),
            (":9443", "neither"),
        ] {
            let problem = check_advertise(bad).unwrap_err();
            assert!(problem.contains(words), "{bad}: {problem}");
        }
        let long = format!("{}.example:1", "a".repeat(250));
        assert!(check_advertise(&long).unwrap_err().contains("255 bytes"));
    }
}
