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
use proxypool_core::LockExt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls::pki_types::CertificateDer;

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
    })
}

/// The certificate's DNS subject alternative names, else its subject common names,
/// canonical (lower case, no trailing dot). The certificate was verified by the handshake,
/// so this only walks its DER to the two fields.
fn names_of(der: &CertificateDer<'_>) -> Vec<String> {
    let Some((0x30, certificate)) = Tlvs(der.as_ref()).next() else {
        return Vec::new();
    };
    let Some((0x30, tbs)) = Tlvs(certificate).next() else {
        return Vec::new();
    };
    // TBSCertificate: [0] version (optional), serial, signature, issuer, validity,
    // subject, subjectPublicKeyInfo, [1] and [2] unique ids, [3] extensions.
    let fields: Vec<(u8, &[u8])> = Tlvs(tbs).filter(|(tag, _)| *tag != 0xa0).collect();
    let subject = fields.get(4).filter(|(tag, _)| *tag == 0x30).map(|f| f.1);
    let extensions = fields.iter().find(|(tag, _)| *tag == 0xa3).map(|f| f.1);
    let mut names: Vec<String> = extensions
        .map(dns_names)
        .unwrap_or_default()
        .into_iter()
        .map(canonical)
        .collect();
    if names.is_empty() {
        names = subject
            .map(|subject| common_names(subject).map(canonical).collect())
            .unwrap_or_default();
    }
    names.sort();
    names.dedup();
    names
}

fn canonical(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The `dNSName`s of the subject alternative name extension, from the contents of the
/// `[3]` extensions field.
fn dns_names(extensions: &[u8]) -> Vec<&str> {
    const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
    let Some((0x30, list)) = Tlvs(extensions).next() else {
        return Vec::new();
    };
    Tlvs(list)
        .filter(|(tag, _)| *tag == 0x30)
        .filter_map(|(_, extension)| {
            let mut parts = Tlvs(extension);
            let (0x06, oid) = parts.next()? else {
                return None;
            };
            if oid != SUBJECT_ALT_NAME {
                return None;
            }
            // An optional `critical` BOOLEAN, then the OCTET STRING.
            let value = parts.find(|(tag, _)| *tag == 0x04)?.1;
            match Tlvs(value).next()? {
                (0x30, general_names) => Some(general_names),
                _ => None,
            }
        })
        .flat_map(Tlvs)
        .filter(|(tag, _)| *tag == 0x82)
        .filter_map(|(_, name)| std::str::from_utf8(name).ok())
        .collect()
}

/// The common names in a DER subject (the contents of its `RDNSequence`): each
/// `SET { SEQUENCE { OID 2.5.4.3, string } }` with a UTF-8, printable or IA5 string.
fn common_names(subject: &[u8]) -> impl Iterator<Item = &str> {
    const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    Tlvs(subject)
        .filter(|(tag, _)| *tag == 0x31)
        .flat_map(|(_, set)| Tlvs(set))
        .filter(|(tag, _)| *tag == 0x30)
        .filter_map(|(_, attribute)| {
            let mut parts = Tlvs(attribute);
            let (0x06, oid) = parts.next()? else {
                return None;
            };
            let (0x0c | 0x13 | 0x16, value) = parts.next()? else {
                return None;
            };
            (oid == COMMON_NAME).then(|| std::str::from_utf8(value).ok())?
        })
}

/// The DER tag-length-value items of a buffer, stopping at the first malformed one.
struct Tlvs<'a>(&'a [u8]);

impl<'a> Iterator for Tlvs<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (&tag, rest) = self.0.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                self.0 = &[];
                return None;
            }
            let (bytes, rest) = rest.split_at(count);
            let len = bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
            (len, rest)
        };
        if rest.len() < len {
            self.0 = &[];
            return None;
        }
        let (value, rest) = rest.split_at(len);
        self.0 = rest;
        Some((tag, value))
    }
}

#[cfg(test)]
mod tests;
