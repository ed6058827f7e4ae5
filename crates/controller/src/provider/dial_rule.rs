//! Where a vendor list fetch may connect: unless the upstream sets `allow_private_hosts`,
//! never to an internal address (`proxypool_core::is_internal_address`, the rule the
//! list's entries and the checker obey), for the list URL's host and for every redirect
//! and next-page target alike. Otherwise a vendor (or whoever answers for it) could send
//! the fetch, with the vendor account's authentication, into our own network: a blind
//! request forgery that no answer needs to come back from.
//!
//! The rule judges the address that is dialed, not a lookup of its own: the fetch's
//! reqwest client resolves every name through [`CheckedResolver`], which refuses the name
//! when any of its addresses is internal (as the entries' rule does) and otherwise hands
//! reqwest exactly the addresses it judged, in the form a socket connects to (an
//! IPv4-mapped answer as its IPv4 address). A name that answers differently the next time
//! is judged again at that connection. An address written in the URL is never resolved,
//! so [`DialRule::check_literal`] judges it before the request is built.
//!
//! Either refusal comes before any connection, so nothing (the authentication least of
//! all) is sent; the fetch fails as `private_host`, naming the host and the address.

use super::failure::FetchError;
use proxypool_core::{dial_address, dial_ip, is_internal_address};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};

/// Which addresses one upstream's fetch may connect to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DialRule {
    /// `allow_private_hosts` not set.
    refuse_internal: bool,
    /// What counts as internal: `is_internal_address`, except in this module's tests,
    /// which must tell a "public" loopback address from an internal one.
    internal: fn(IpAddr) -> bool,
}

impl DialRule {
    /// The rule of an upstream with `allow_private_hosts` = `allow_private`.
    pub(crate) fn new(allow_private: bool) -> Self {
        DialRule {
            refuse_internal: !allow_private,
            internal: is_internal_address,
        }
    }

    /// Refuses a URL whose host is an internal address literal.
    pub(crate) fn check_literal(&self, url: &Url) -> Result<(), FetchError> {
        let Some(host) = url.host_str() else {
            return Ok(());
        };
        // The URL parser has made every numeric IPv4 form (`2130706433`, `127.1`) and
        // every IPv6 spelling into one address, so a parse here is what is dialed.
        match host.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(ip) => self.check(host, &[dial_ip(ip)]),
            Err(_) => Ok(()),
        }
    }

    /// Refuses `host` when any of `addresses` (as dialed) is internal.
    fn check(&self, host: &str, addresses: &[IpAddr]) -> Result<(), FetchError> {
        if !self.refuse_internal {
            return Ok(());
        }
        match addresses.iter().find(|ip| (self.internal)(**ip)) {
            Some(inside) => Err(FetchError::PrivateHost(internal_target(host, *inside))),
            None => Ok(()),
        }
    }

    /// The resolver that applies this rule to every name the fetch connects to.
    pub(crate) fn resolver(self) -> CheckedResolver {
        CheckedResolver { rule: self }
    }
}

/// How a refused target is named: the host, and the internal address when the host is a
/// name (never the URL, which may carry a key).
fn internal_target(host: &str, address: IpAddr) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok() {
        address.to_string()
    } else {
        format!("{bare} ({address})")
    }
}

/// A name refused by the rule, as it travels through reqwest's error chain (where
/// `fetch::sent` finds it again).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub(crate) FetchError);

/// reqwest's resolver for a vendor fetch: the system resolver, then [`DialRule`] on
/// every address, and only the judged addresses handed on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckedResolver {
    rule: DialRule,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rule = self.rule;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let addrs: Vec<SocketAddr> = found.map(dial_address).collect();
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            rule.check(&host, &ips).map_err(Refused)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests;
