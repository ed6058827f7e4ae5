//! Client authentication: proxy credentials (HTTP `Proxy-Authorization: Basic` or SOCKS5
//! username/password) checked against the snapshot's clients, then the username's
//! selectors, the source IP allowlist and the client's allowed upstreams and regions.
//!
//! Order matters: the password is verified before any selector error is reported, so an
//! unauthenticated caller cannot probe which client ids exist.

use crate::admission::ClientPolicy;
use crate::refusal::Refusal;
use crate::selector::{Selectors, parse_selectors, split_client};
use crate::snapshot::{ClientEntry, SnapshotView};
use std::net::IpAddr;
use std::sync::Arc;

/// A client that proved who it is, with what it asked for.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    pub client: Arc<ClientEntry>,
    pub selectors: Selectors,
}

/// Authenticates `username`/`password` from `peer` against `view`.
pub(crate) fn authenticate(
    view: &SnapshotView,
    username: &str,
    password: &str,
    peer: IpAddr,
    max_sesstime_minutes: u32,
) -> Result<Authenticated, Refusal> {
    let (client_id, rest) =
        split_client(username, |id| view.has_client(id)).ok_or(Refusal::AuthRequired)?;
    let client = view.client(client_id).ok_or(Refusal::AuthRequired)?;
    if !client.password_hash.verify(password) {
        return Err(Refusal::AuthRequired);
    }
    let selectors = parse_selectors(rest, max_sesstime_minutes).map_err(Refusal::BadSelector)?;
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
    if let Some(upstream) = &selectors.upstream
        && !client.upstream_allowed(upstream)
    {
        return Err(Refusal::Forbidden(format!(
            "upstream '{upstream}' is not allowed for this client"
        )));
    }
    if let Some(region) = &selectors.region
        && !client.region_allowed(Some(region))
    {
        return Err(Refusal::Forbidden(format!(
            "region '{region}' is not allowed for this client"
        )));
    }
    Ok(Authenticated {
        client: Arc::clone(client),
        selectors,
    })
}
