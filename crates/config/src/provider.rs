//! An upstream's `provider` table: where a vendor's proxies come from (an `http` list
//! endpoint or a `static` list in the file), how the list is read, which hosts its entries
//! may point at ([`AllowedHost`]), and the checks of all of it. A list API's pages,
//! authentication and field pointers are [`crate::vendor_api`]'s.

use crate::check::Check;
use crate::cidr::parse_block;
use crate::duration::Millis;
use crate::secret::SecretRef;
use crate::target::{TargetUrl, split_host_port};
use crate::vendor_api::{FieldMapConfig, PaginationConfig, VendorAuthConfig};
use proxypool_core::IpNet;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Where a vendor's proxies come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// `http` only: the list URL (`https://`; `http://` only with `allow_plaintext`).
    #[serde(default)]
    pub url: Option<String>,
    /// `http` only: allow an `http://` list URL. On-path attackers then see the
    /// `authorization` and can add entries, so only for a vendor on the same host or a
    /// trusted network (`dev` and the simulated vendor); a warning is logged at start.
    #[serde(default)]
    pub allow_plaintext: bool,
    /// `http` only, for an `https://` list: the CA bundle the vendor must chain to (unset =
    /// the public roots); a client certificate if the vendor wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ClientTlsConfig>,
    /// `http` only: where a listed entry may point to get the upstream's `credentials`:
    /// domain suffixes (`vendor.example` matches it and `*.vendor.example`) and CIDR blocks
    /// (`203.0.113.0/24`). An entry with no credentials of its own on a host outside them
    /// is refused (counted in the upstream's status), so a tampered list cannot collect
    /// the vendor account's credentials. Required when `credentials` is set.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// `http` only: accept entries on loopback, private (RFC 1918, unique-local), CGNAT or
    /// link-local addresses. Off: such entries, and entries whose name resolves to such an
    /// address, are refused and counted, and the checker does not dial a host that
    /// resolves inside. `dev` and tests with the simulated vendor (which lists loopback
    /// proxies) set it.
    #[serde(default)]
    pub allow_private_hosts: bool,
    /// `http` only: how the list is written.
    #[serde(default)]
    pub format: Option<ListFormat>,
    /// `static` only: `scheme://host:port` entries (credentials come from the upstream's
    /// `credentials`, never inline).
    #[serde(default)]
    pub proxies: Vec<String>,
    /// `backconnect` only: the vendor gateway, its username syntax and the sessions to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backconnect: Option<crate::backconnect::BackconnectConfig>,
    /// How often to fetch (or, for `static`, to refresh the lifetimes).
    #[serde(default = "default_fetch_interval")]
    pub interval: Millis,
    /// Up to this much is added to each interval at random, so vendors are not polled in
    /// lock step.
    #[serde(default)]
    pub jitter: Millis,
    /// The deadline of each page's fetch (connect, redirects, headers, body).
    #[serde(default = "default_fetch_timeout")]
    pub timeout: Millis,
    /// Largest list accepted, all pages' decoded bodies together; a larger one fails the
    /// round whole.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// `http` only: the `Authorization` header value, by reference (the shorthand of
    /// `auth.header` with `name = "Authorization"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<SecretRef>,
    /// `http` only: a header of any name, HTTP Basic, or a query parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<VendorAuthConfig>,
    /// `http` only: where besides the list URL's own host and port a redirect or a
    /// next-page link may lead: a host (exact name or address) on its scheme's standard
    /// port, or `host:port` on that port only (the list's own host on another port too).
    /// They receive the fetch's authentication.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirect_hosts: Vec<String>,
    /// `http` only: how a list spread over pages is walked (unset: one page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pagination: Option<PaginationConfig>,
    /// `http` with `format = "json"` only: where the list and each field are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<FieldMapConfig>,
}

fn default_fetch_interval() -> Millis {
    Millis::from_secs(30)
}

fn default_fetch_timeout() -> Millis {
    Millis::from_secs(10)
}

fn default_max_bytes() -> usize {
    4 * 1024 * 1024
}

/// `http` (a vendor list endpoint), `static` (a fixed list in this file) or
/// `backconnect` (a vendor gateway whose username picks the exit: sessions as proxies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Http,
    Static,
    Backconnect,
}

/// How a vendor writes its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListFormat {
    /// One proxy per line: `[scheme://]host:port[:user:pass]` or
    /// `scheme://user:pass@host:port`.
    Text,
    /// A JSON array of objects (or `{"proxies": [...]}` / `{"data": [...]}`).
    Json,
}

/// One `allowed_hosts` entry, as the controller matches a listed host against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHost {
    /// A domain suffix: the name itself and every name under it (lower-case, without a
    /// leading `*.`).
    Suffix(String),
    /// A CIDR block (a bare address is a one-host block).
    Block(IpNet),
}

impl AllowedHost {
    /// Parses an entry: a CIDR block or a domain suffix (letters, digits, `-`, `.`).
    pub fn parse(entry: &str) -> Result<Self, String> {
        if entry.contains('/') || entry.parse::<IpAddr>().is_ok() {
            return parse_block(entry).map(AllowedHost::Block);
        }
        let name = entry.strip_prefix("*.").unwrap_or(entry);
        let valid = !name.is_empty()
            && name.len() <= 253
            && name
                .split('.')
                .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        if valid {
            Ok(AllowedHost::Suffix(name.to_ascii_lowercase()))
        } else {
            Err(format!(
                "{entry:?} is neither a domain suffix nor a CIDR block"
            ))
        }
    }
}

/// Checks an upstream's `provider` table at `path`; `has_credentials` = the upstream has
/// default `credentials`, which only `allowed_hosts` may receive.
pub(crate) fn validate(
    c: &mut Check<'_>,
    path: &str,
    p: &mut ProviderConfig,
    has_credentials: bool,
) {
    c.duration(
        &format!("{path}.interval"),
        p.interval,
        Millis(100),
        Millis::from_secs(86_400),
    );
    c.require(
        p.jitter <= p.interval,
        format!("{path}.jitter"),
        "must not be longer than interval",
    );
    c.duration(
        &format!("{path}.timeout"),
        p.timeout,
        Millis(1),
        Millis::from_secs(300),
    );
    c.require(
        (1..=64 * 1024 * 1024).contains(&p.max_bytes),
        format!("{path}.max_bytes"),
        "must be between 1 and 67108864 (64 MiB)",
    );
    match p.kind {
        ProviderKind::Http => {
            match &p.url {
                None => c.at(format!("{path}.url"), "an http provider needs a url"),
                Some(url) => match TargetUrl::parse_list(url) {
                    Err(message) => c.at(format!("{path}.url"), message),
                    Ok((false, _)) if !p.allow_plaintext => c.at(
                        format!("{path}.url"),
                        "an http:// list exposes the vendor's authorization and lets anyone \
                         on the path add entries: use https://, or set allow_plaintext = true \
                         for a vendor on a trusted network",
                    ),
                    Ok((false, _)) if p.tls.is_some() => {
                        c.at(format!("{path}.tls"), "only for an https:// list")
                    }
                    Ok(_) => {}
                },
            }
            if let Some(tls) = &mut p.tls {
                crate::tls::check_client(c, &format!("{path}.tls"), tls);
            }
            for (j, host) in p.allowed_hosts.iter().enumerate() {
                if let Err(message) = AllowedHost::parse(host) {
                    c.at(format!("{path}.allowed_hosts[{j}]"), message);
                }
            }
            c.require(
                !has_credentials || !p.allowed_hosts.is_empty(),
                format!("{path}.allowed_hosts"),
                "required with credentials: the vendor's hosts (domain suffixes or CIDRs) that \
                 may receive them, so a tampered list cannot collect them",
            );
            c.require(
                p.format.is_some(),
                format!("{path}.format"),
                "an http provider needs format = \"text\" or \"json\"",
            );
            c.require(
                p.proxies.is_empty(),
                format!("{path}.proxies"),
                "only a static provider lists proxies",
            );
            if let Some(authorization) = &mut p.authorization {
                c.resolve_plain(&format!("{path}.authorization"), authorization);
            }
            let shorthand = p.authorization.is_some();
            if let Some(auth) = &mut p.auth {
                crate::vendor_api::validate_auth(c, &format!("{path}.auth"), auth, shorthand);
            }
            crate::vendor_api::validate_redirect_hosts(
                c,
                &format!("{path}.redirect_hosts"),
                &p.redirect_hosts,
            );
            if let Some(pagination) = &p.pagination {
                crate::vendor_api::validate_pagination(
                    c,
                    &format!("{path}.pagination"),
                    pagination,
                    p.format == Some(ListFormat::Json),
                );
            }
            if let Some(fields) = &p.fields {
                let json = p.format == Some(ListFormat::Json);
                crate::vendor_api::validate_fields(c, &format!("{path}.fields"), fields, json);
            }
        }
        ProviderKind::Backconnect => {
            c.require(
                p.url.is_none() && p.format.is_none() && p.proxies.is_empty(),
                format!("{path}.url"),
                "a backconnect provider takes no url, format or proxies: its gateway is [upstreams.provider.backconnect]",
            );
            c.require(
                !p.allow_plaintext
                    && p.tls.is_none()
                    && p.allowed_hosts.is_empty()
                    && !p.allow_private_hosts
                    && p.authorization.is_none()
                    && p.auth.is_none()
                    && p.redirect_hosts.is_empty()
                    && p.pagination.is_none()
                    && p.fields.is_none(),
                format!("{path}.kind"),
                "list settings (allow_plaintext, tls, allowed_hosts, allow_private_hosts, \
                 authorization, auth, redirect_hosts, pagination, fields) are for an http provider",
            );
            match &mut p.backconnect {
                Some(backconnect) => crate::backconnect::validate(
                    c,
                    &format!("{path}.backconnect"),
                    backconnect,
                    has_credentials,
                ),
                None => c.at(
                    format!("{path}.backconnect"),
                    "a backconnect provider needs its [upstreams.provider.backconnect] table",
                ),
            }
        }
        ProviderKind::Static => {
            c.require(
                !p.allow_plaintext
                    && p.tls.is_none()
                    && p.allowed_hosts.is_empty()
                    && !p.allow_private_hosts,
                format!("{path}.allowed_hosts"),
                "allow_plaintext, tls, allowed_hosts and allow_private_hosts are for an http provider",
            );
            c.require(
                p.url.is_none() && p.format.is_none(),
                format!("{path}.url"),
                "a static provider takes no url or format",
            );
            c.require(
                p.authorization.is_none() && p.auth.is_none(),
                format!("{path}.authorization"),
                "a static provider takes no authorization or auth",
            );
            c.require(
                p.redirect_hosts.is_empty() && p.pagination.is_none() && p.fields.is_none(),
                format!("{path}.pagination"),
                "redirect_hosts, pagination and fields are for an http provider",
            );
            c.require(
                !p.proxies.is_empty(),
                format!("{path}.proxies"),
                "a static provider needs at least one proxy",
            );
            for (j, entry) in p.proxies.iter().enumerate() {
                if let Err(message) = static_entry(entry) {
                    c.at(format!("{path}.proxies[{j}]"), message);
                }
            }
        }
    }
}

/// A static entry: `[scheme://]host:port` with scheme `http`, `https` or `socks5`; the
/// credentials come from the upstream's `[credentials]`, never inline.
fn static_entry(entry: &str) -> Result<(), String> {
    let entry = entry.trim();
    if entry.is_empty() {
        return Err("empty entry".into());
    }
    let authority = match entry.split_once("://") {
        Some(("http" | "https" | "socks5", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!("unknown scheme {scheme:?} (http, https or socks5)"));
        }
        None => entry,
    };
    if authority.contains('@') || authority.matches(':').count() > 1 && !authority.starts_with('[')
    {
        return Err(
            "credentials may not be written inline; use the upstream's [credentials]".into(),
        );
    }
    if authority.contains(['/', '?', ' ']) {
        return Err("write [scheme://]host:port, nothing more".into());
    }
    match split_host_port(authority)? {
        (_, Some(_)) => Ok(()),
        (_, None) => Err("the port is missing: write host:port".into()),
    }
}
