//! Mutual TLS on the TLS listener: the names a client certificate carries and the client
//! they name.
//!
//! With `[gateway.tls] client_ca` the handshake already refused a certificate that does
//! not chain to that CA (or none at all). What is left is identity: the certificate's DNS
//! names (subject alternative names; when it has none, the subject's common names),
//! compared case-insensitively with each client's `tls_names`. A certificate whose names
//! match exactly one client authenticates the connection's requests as that client, with
//! no `Proxy-Authorization` needed ([`by_certificate`]); one that matches none (or, by a
//! configuration mistake, several) identifies nobody, and its requests authenticate with
//! `Proxy-Authorization` as on the plain listener. The match is looked up once per
//! snapshot generation per connection, so a kept-alive connection pays it once.

use crate::policy::limits::ClientPolicy;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::snapshot::{ClientEntry, SnapshotView};
use proxypool_config::client::canonical_tls_name;
use proxypool_core::LockExt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls::pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;

/// The certificate a client presented, as far as identity goes.
#[derive(Debug)]
pub(crate) struct ClientCertificate {
    /// Its names, lower case, without a trailing dot.
    names: Box<[String]>,
    /// The client those names matched in the view of the given generation.
    matched: Mutex<Option<(u64, Option<Arc<ClientEntry>>)>>,
}

impl ClientCertificate {
    /// The names of the end-entity certificate `der`; `None` when it carries none (or
    /// cannot be read, which a verified certificate can).
    pub(crate) fn of(der: &CertificateDer<'_>) -> Option<Self> {
        let names = names_of(der);
        if names.is_empty() {
            return None;
        }
        Some(ClientCertificate {
            names: names.into(),
            matched: Mutex::new(None),
        })
    }

    /// The one client of `view` whose `tls_names` hold one of the names, if exactly one.
    pub(crate) fn client(&self, view: &SnapshotView) -> Option<Arc<ClientEntry>> {
        if let Some((generation, client)) = self.matched.lock_or_recover().as_ref()
            && *generation == view.generation
        {
            return client.clone();
        }
        let mut found = view.clients().filter(|client| {
            client
                .tls_names
                .iter()
                .any(|name| self.names.contains(name))
        });
        let client = match (found.next(), found.next()) {
            (Some(client), None) => Some(Arc::clone(client)),
            (Some(_), Some(_)) => {
                tracing::warn!(
                    names = ?self.names,
                    "a client certificate's names are in the tls_names of several clients: it identifies none"
                );
                None
            }
            (None, _) => None,
        };
        *self.matched.lock_or_recover() = Some((view.generation, client.clone()));
        client
    }
}

/// A request authenticated by the certificate alone: the client's address allowlist and
/// policy still apply; no selectors (those come with a username).
pub(crate) fn by_certificate(
    client: Arc<ClientEntry>,
    peer: IpAddr,
) -> Result<Authenticated, Refusal> {
    if !client.ip_allowed(peer) {
        return Err(Refusal::Forbidden(format!(
            "source address {peer} is not in the client's allowlist"
        )));
    }
    if client.policy == ClientPolicy::Invalid {
        return Err(Refusal::Forbidden(
            "the client's rate-limit policy is invalid".into(),
        ));
    }
    Ok(Authenticated {
        client,
        selectors: Default::default(),
        fleet_moved: false,
    })
}

/// The certificate's DNS subject alternative names, else its subject common names,
/// canonical (lower case, no trailing dot), read with x509-parser (already in the tree for
/// the inspection CA). The handshake verified the certificate; one that cannot be read
/// names nothing.
fn names_of(der: &CertificateDer<'_>) -> Vec<String> {
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(der.as_ref()) else {
        return Vec::new();
    };
    let dns_names: Vec<&str> = match certificate.subject_alternative_name() {
        Ok(Some(extension)) => extension
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(name) => Some(*name),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut names: Vec<String> = if dns_names.is_empty() {
        certificate
            .subject()
            .iter_common_name()
            .filter_map(|name| name.as_str().ok())
            .map(canonical_tls_name)
            .collect()
    } else {
        dns_names.into_iter().map(canonical_tls_name).collect()
    };
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests;
