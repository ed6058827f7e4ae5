//! TLS settings: a listener's certificate files ([`ServerTlsConfig`], `[api.tls]`,
//! `[control.tls]`, `[gateway.admin_tls]`) and an outbound link's trust and identity
//! ([`ClientTlsConfig`], `[gateway.controller_tls]`, `[store.tls]`, an upstream's
//! `provider.tls`), and the TLS to an upstream's `https` proxies ([`ProxyTlsConfig`], an
//! upstream's `proxy_tls`).
//!
//! Relative paths are taken from the file's directory (like `{ file = ... }` secrets) and
//! made absolute at load; each named file must exist and hold PEM text, so a typo fails
//! the load with its key instead of the first handshake. The certificates themselves are
//! parsed by the component that serves them (`proxypool_edge::tls`).

use crate::check::Check;
use crate::duration::Millis;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A TLS listener. The files are re-read when they change (polled every
/// `poll_interval`), so a renewed certificate needs no restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsConfig {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// When set, every client must present a certificate that chains to this CA bundle
    /// (mutual TLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
    /// How often the files are looked at for a change.
    #[serde(default = "default_poll")]
    pub poll_interval: Millis,
}

fn default_poll() -> Millis {
    Millis::from_secs(5)
}

/// An outbound TLS link: whom to trust and, optionally, which certificate to present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTlsConfig {
    /// The CA bundle the server must chain to. Unset = the public roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// A client certificate chain to present (mutual TLS); needs `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key; needs `cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

/// How the gateways and the checker reach an upstream's `https` proxies: TLS to the proxy
/// itself, verified against `ca` under `server_name`, before the proxy protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyTlsConfig {
    /// The CA bundle the proxies' certificates must chain to. Unset = the public roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// The name the proxies' certificates must carry (a vendor that lists addresses but
    /// certifies a host name). Unset = each proxy's own host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

/// Makes `path` absolute against the file's directory and checks it holds PEM text.
pub(crate) fn pem_file(c: &mut Check<'_>, key: &str, path: &mut PathBuf) {
    c.anchor(path);
    match std::fs::read(&*path) {
        Ok(bytes) if bytes.windows(11).any(|w| w == b"-----BEGIN ") => {}
        Ok(_) => c.at(key, format!("{} holds no PEM block", path.display())),
        Err(error) => c.at(key, format!("cannot read {}: {error}", path.display())),
    }
}

pub(crate) fn check_server(c: &mut Check<'_>, path: &str, tls: &mut ServerTlsConfig) {
    pem_file(c, &format!("{path}.cert"), &mut tls.cert);
    pem_file(c, &format!("{path}.key"), &mut tls.key);
    if let Some(ca) = &mut tls.client_ca {
        pem_file(c, &format!("{path}.client_ca"), ca);
    }
    c.duration(
        &format!("{path}.poll_interval"),
        tls.poll_interval,
        Millis(100),
        Millis::from_secs(3600),
    );
}

pub(crate) fn check_client(c: &mut Check<'_>, path: &str, tls: &mut ClientTlsConfig) {
    if let Some(ca) = &mut tls.ca {
        pem_file(c, &format!("{path}.ca"), ca);
    }
    match (&mut tls.cert, &mut tls.key) {
        (Some(cert), Some(key)) => {
            pem_file(c, &format!("{path}.cert"), cert);
            pem_file(c, &format!("{path}.key"), key);
        }
        (None, None) => {}
        (Some(_), None) => c.at(format!("{path}.key"), "a client certificate needs its key"),
        (None, Some(_)) => c.at(format!("{path}.cert"), "a key needs its client certificate"),
    }
}

pub(crate) fn check_proxy(c: &mut Check<'_>, path: &str, tls: &mut ProxyTlsConfig) {
    if let Some(ca) = &mut tls.ca {
        pem_file(c, &format!("{path}.ca"), ca);
    }
    if let Some(name) = &tls.server_name {
        c.require(
            is_server_name(name),
            format!("{path}.server_name"),
            "must be a host name or an IP address",
        );
    }
}

/// Whether `name` can be a TLS server name: an IP address, or a DNS name of letters,
/// digits, `-` and `.` (at most 253 characters, labels of 1 to 63).
pub(crate) fn is_server_name(name: &str) -> bool {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}
