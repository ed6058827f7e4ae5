//! What a vendor list entry turns into, and why an entry can be dropped while parsing.
//!
//! Parsing is per entry: a malformed entry is dropped and counted by reason, it never fails
//! the list. Host, credential and label checks happen later, in the store's shared batch
//! validation (`proxypool_core::prepare_batch`), so every adapter drops the same things.

use super::hygiene::{HostPolicy, Refusal};
use proxypool_core::{Candidate, Credentials, Label, Protocol};
use proxypool_proto::inet_aton_v4;
use std::collections::BTreeMap;

/// Why an entry was dropped while parsing. The set is closed, so the reasons on an
/// upstream's status and in the metrics stay few (`docs/vendors.md` lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryError {
    /// Not in any accepted shape.
    Malformed,
    InvalidPort,
    UnknownScheme,
    /// An expiry (`expires_at`, `expires_at_ms` or the mapped field) that is not a time.
    InvalidExpiresAt,
    /// A lifetime (`ttl`, `ttl_seconds`, `ttl_ms`) that is not a non-negative number.
    InvalidTtl,
    /// The vendor's own validity field says the proxy is not usable.
    VendorInvalid,
    /// A URL line's user or password holds a `%` that starts no valid escape.
    InvalidEscape,
    /// Refused by the upstream's [`HostPolicy`]: it would get the default credentials on a
    /// host outside `allowed_hosts`.
    HostNotAllowed,
    /// Refused by the upstream's [`HostPolicy`]: a loopback, private or link-local host.
    PrivateHost,
}

impl EntryError {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryError::Malformed => "malformed_entry",
            EntryError::InvalidPort => "invalid_port",
            EntryError::UnknownScheme => "unknown_scheme",
            EntryError::InvalidExpiresAt => "invalid_expires_at",
            EntryError::InvalidTtl => "invalid_ttl",
            EntryError::VendorInvalid => "vendor_invalid",
            EntryError::InvalidEscape => "invalid_escape",
            EntryError::HostNotAllowed => "host_not_allowed",
            EntryError::PrivateHost => "private_host",
        }
    }

    /// Whether the host policy refused the entry (rather than its shape).
    pub fn is_refusal(self) -> bool {
        matches!(self, EntryError::HostNotAllowed | EntryError::PrivateHost)
    }
}

/// A field of a kept entry that could not be read and was left out: the entry is taken
/// without it (an issue time only helps after a loss of the pool store; a proxy with a
/// good host and port is worth more than it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ignored {
    /// `issued_at`, `issued_at_ms`, `created_at` or the mapped field is not a time.
    InvalidIssuedAt,
}

impl Ignored {
    pub fn as_str(self) -> &'static str {
        match self {
            Ignored::InvalidIssuedAt => "invalid_issued_at",
        }
    }
}

/// What the upstream's configuration supplies for fields an entry leaves out.
#[derive(Debug, Clone)]
pub struct EntryDefaults {
    pub protocol: Protocol,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub credentials: Option<Credentials>,
    /// The entry rules of a fetched list (`None` for a static list, which is our own).
    pub hosts: Option<HostPolicy>,
}

impl EntryDefaults {
    /// Plain HTTP with no labels, credentials or host rules: what the parsers' tests start
    /// from.
    #[cfg(test)]
    pub(crate) fn plain_http() -> Self {
        EntryDefaults {
            protocol: Protocol::Http,
            region: None,
            carrier: None,
            credentials: None,
            hosts: None,
        }
    }

    pub(crate) fn candidate(
        &self,
        protocol: Option<Protocol>,
        host: &str,
        port: u16,
        credentials: Option<Credentials>,
    ) -> Result<Candidate, EntryError> {
        // A numeric IPv4 form (`2130706433`, `127.1`) is the address a dialer would reach:
        // checked, stored and dialed as that address, never as a name.
        let canonical = inet_aton_v4(host).map(|ip| ip.to_string());
        let host = canonical.as_deref().unwrap_or(host);
        // Checked before the credentials are attached: a refused entry never holds them.
        if let Some(hosts) = &self.hosts {
            let defaulted = credentials.is_none() && self.credentials.is_some();
            hosts
                .check(host, defaulted)
                .map_err(|refusal| match refusal {
                    Refusal::HostNotAllowed => EntryError::HostNotAllowed,
                    Refusal::PrivateHost => EntryError::PrivateHost,
                })?;
        }
        let mut candidate = Candidate::new(protocol.unwrap_or(self.protocol), host, port);
        candidate.credentials = credentials.or_else(|| self.credentials.clone());
        candidate.region = self.region.as_ref().map(|l| l.as_str().to_owned());
        candidate.carrier = self.carrier.as_ref().map(|l| l.as_str().to_owned());
        Ok(candidate)
    }
}

/// Parses a scheme name as vendors write it.
pub(crate) fn parse_scheme(scheme: &str) -> Result<Protocol, EntryError> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Ok(Protocol::Http),
        "https" => Ok(Protocol::Https),
        // socks5h only says who resolves names; our dialers send names to the proxy anyway.
        "socks5" | "socks5h" | "socks" => Ok(Protocol::Socks5),
        _ => Err(EntryError::UnknownScheme),
    }
}

pub(crate) fn parse_port(text: &str) -> Result<u16, EntryError> {
    match text.trim().parse::<u16>() {
        Ok(0) | Err(_) => Err(EntryError::InvalidPort),
        Ok(port) => Ok(port),
    }
}

/// A parsed list: the candidates, the entries dropped by reason, and the fields of kept
/// entries that were left out, by reason.
#[derive(Debug, Default)]
pub struct ParsedList {
    pub candidates: Vec<Candidate>,
    pub dropped: BTreeMap<EntryError, u32>,
    pub ignored: BTreeMap<Ignored, u32>,
}

impl ParsedList {
    pub(crate) fn push(&mut self, entry: Result<Candidate, EntryError>) {
        match entry {
            Ok(candidate) => self.candidates.push(candidate),
            Err(reason) => *self.dropped.entry(reason).or_default() += 1,
        }
    }

    /// A kept entry's field left out for `reason`.
    pub(crate) fn ignore(&mut self, reason: Ignored) {
        *self.ignored.entry(reason).or_default() += 1;
    }

    /// Adds another page's candidates, drops and left-out fields to this list.
    pub(crate) fn absorb(&mut self, page: ParsedList) {
        self.candidates.extend(page.candidates);
        for (reason, n) in page.dropped {
            *self.dropped.entry(reason).or_default() += n;
        }
        for (reason, n) in page.ignored {
            *self.ignored.entry(reason).or_default() += n;
        }
    }

    /// Entries read, kept or dropped.
    pub(crate) fn entries(&self) -> usize {
        self.candidates.len() + self.dropped.values().sum::<u32>() as usize
    }
}
