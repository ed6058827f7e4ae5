//! `[gateway.inspection]`: TLS inspection of the `CONNECT` tunnels of the clients that
//! opt in (`[[clients]] inspection`). The gateway ends such a tunnel itself with a leaf
//! certificate for the requested host, minted from the operator's CA (`ca_cert`,
//! `ca_key`), and sends each request inside to the origin over TLS verified against
//! `origin_ca` (unset: the public roots), so bans, retries and cooldowns work on https as
//! on plain http.
//!
//! Checked at load: the PEM files exist and hold what their key says (a certificate, a
//! private key), the bypass names are host names (canonical: lower case, no trailing dot),
//! the cache bound and the leaf validity are in range. Whether the key belongs to the
//! certificate is checked by the gateway when it loads them (a gateway refuses to start,
//! a reload is refused). Everything here applies on reload: the CA files are read again.

use crate::check::Check;
use crate::duration::Millis;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[gateway.inspection]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InspectionConfig {
    /// The CA certificate leaves are issued under (PEM); clients that are inspected must
    /// trust it.
    pub ca_cert: PathBuf,
    /// The CA's private key (PEM, PKCS#8: `BEGIN PRIVATE KEY`): a secret file, readable by the
    /// gateway's account only (`check-config` warns otherwise). Never logged or shown.
    pub ca_key: PathBuf,
    /// The CA bundle origins must chain to. Unset = the public roots (Mozilla's list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_ca: Option<PathBuf>,
    /// Domains never inspected (their tunnels pass through as they are): `"example.com"`
    /// is the name and every name under it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bypass: Vec<String>,
    /// Most minted leaf certificates kept in memory (the least recently used goes first).
    #[serde(default = "default_leaf_cache")]
    pub leaf_cache: usize,
    /// How long a minted leaf is valid (it is backdated by an hour, for clients whose
    /// clock is behind).
    #[serde(default = "default_leaf_validity")]
    pub leaf_validity: Millis,
}

/// Most leaves `leaf_cache` may keep.
pub const MAX_LEAF_CACHE: usize = 1_000_000;

fn default_leaf_cache() -> usize {
    1024
}

fn default_leaf_validity() -> Millis {
    Millis::from_secs(24 * 3600)
}

impl InspectionConfig {
    /// Whether `host` (canonical: lower case, no trailing dot) is on the bypass list: it
    /// or a domain it is under is listed.
    pub fn bypassed(&self, host: &str) -> bool {
        self.bypass.iter().any(|domain| {
            host == domain
                || host
                    .strip_suffix(domain.as_str())
                    .is_some_and(|head| head.ends_with('.'))
        })
    }
}

/// The one form bypass names and hosts are compared in: lower case, no trailing dot.
pub fn canonical_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Checks `[gateway.inspection]` and canonicalises its bypass names.
pub(crate) fn validate(c: &mut Check<'_>, inspection: &mut InspectionConfig) {
    pem_of(
        c,
        "gateway.inspection.ca_cert",
        &mut inspection.ca_cert,
        "CERTIFICATE",
        "a certificate",
    );
    pem_of(
        c,
        "gateway.inspection.ca_key",
        &mut inspection.ca_key,
        "PRIVATE KEY",
        "a PKCS#8 private key (\"BEGIN PRIVATE KEY\"; `openssl pkcs8 -topk8 -nocrypt` \
         converts an EC or RSA key)",
    );
    if let Some(origin_ca) = &mut inspection.origin_ca {
        pem_of(
            c,
            "gateway.inspection.origin_ca",
            origin_ca,
            "CERTIFICATE",
            "a certificate",
        );
    }
    for (i, name) in inspection.bypass.iter_mut().enumerate() {
        *name = canonical_host(name);
        if let Err(problem) = check_bypass(name) {
            c.at(format!("gateway.inspection.bypass[{i}]"), problem);
        }
    }
    if !(1..=MAX_LEAF_CACHE).contains(&inspection.leaf_cache) {
        c.at(
            "gateway.inspection.leaf_cache",
            format!(
                "must be from 1 to {MAX_LEAF_CACHE}, not {}",
                inspection.leaf_cache
            ),
        );
    }
    c.duration(
        "gateway.inspection.leaf_validity",
        inspection.leaf_validity,
        Millis::from_secs(3600),
        Millis::from_secs(397 * 24 * 3600),
    );
}

/// Anchors `path`, checks it is readable PEM and holds a `-----BEGIN ...{kind}-----` block
/// (`what` names it in the error).
fn pem_of(c: &mut Check<'_>, key: &str, path: &mut PathBuf, kind: &str, what: &str) {
    c.anchor(path);
    match std::fs::read_to_string(&*path) {
        Ok(text) => {
            let holds = text.lines().any(|line| {
                line.trim()
                    .strip_prefix("-----BEGIN ")
                    .and_then(|rest| rest.strip_suffix("-----"))
                    .is_some_and(|label| label == kind)
            });
            if !holds {
                c.at(
                    key,
                    format!("{} holds no PEM block of {what}", path.display()),
                );
            }
        }
        Err(error) => c.at(key, format!("cannot read {}: {error}", path.display())),
    }
}

/// A bypass entry: a host name (letters, digits, `-`, labels of 1 to 63, at most 253
/// characters) or an IP address; never a wildcard (a name covers its subdomains already).
fn check_bypass(name: &str) -> Result<(), &'static str> {
    if name.starts_with("*.") {
        return Err("write the domain without '*.': it covers every name under it already");
    }
    if crate::tls::is_server_name(name) {
        Ok(())
    } else {
        Err("must be a host name (example.com) or an IP address")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_bypass(bypass: &[&str]) -> InspectionConfig {
        InspectionConfig {
            ca_cert: "ca.pem".into(),
            ca_key: "ca-key.pem".into(),
            origin_ca: None,
            bypass: bypass.iter().map(|s| (*s).to_owned()).collect(),
            leaf_cache: default_leaf_cache(),
            leaf_validity: default_leaf_validity(),
        }
    }

    #[test]
    fn a_bypassed_domain_covers_its_subdomains_and_nothing_else() {
        let config = with_bypass(&["bank.example", "10.0.0.1"]);
        for host in [
            "bank.example",
            "www.bank.example",
            "a.b.bank.example",
            "10.0.0.1",
        ] {
            assert!(config.bypassed(host), "{host}");
        }
        for host in [
            "notbank.example",
            "bank.example.org",
            "example",
            "10.0.0.10",
        ] {
            assert!(!config.bypassed(host), "{host}");
        }
    }

    #[test]
    fn bypass_names_are_host_names() {
        assert!(check_bypass("shop.example").is_ok());
        assert!(check_bypass("2001:db8::1").is_ok());
        assert!(check_bypass("*.shop.example").is_err());
        assert!(check_bypass("shop example").is_err());
        assert!(check_bypass("").is_err());
        assert_eq!(canonical_host("Shop.Example."), "shop.example");
    }
}
