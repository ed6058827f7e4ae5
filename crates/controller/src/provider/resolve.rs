//! Names in a fetched vendor list, resolved before their entries are stored: an entry
//! whose name resolves to any loopback, private or link-local address is refused as
//! `private_host`, like an entry written as such an address, so the vendor account's
//! credentials are never stored for (and never sent to) a host inside our network.
//!
//! Each distinct name is resolved once per round (the system resolver, bounded in time and
//! in how many run at once). A name that does not resolve now is kept: the checker
//! resolves it again and connects only to an address it checked, so it cannot be dialed
//! inside later either, and a resolver outage does not empty the pool.

use super::entry::{EntryError, ParsedList};
use super::hygiene::is_internal_address;
use std::collections::{BTreeSet, HashSet};
use std::net::IpAddr;
use std::time::Duration;
use tokio::task::JoinSet;

/// Names resolved at once.
const CONCURRENT_LOOKUPS: usize = 16;

/// Drops the candidates of `list` whose name resolves to an internal address (counted as
/// `private_host`), each lookup bounded by `timeout`.
pub(crate) async fn drop_internal_names(list: &mut ParsedList, timeout: Duration) {
    let names: BTreeSet<String> = list
        .candidates
        .iter()
        .filter(|candidate| is_name(&candidate.host))
        .map(|candidate| candidate.host.to_ascii_lowercase())
        .collect();
    if names.is_empty() {
        return;
    }
    let internal = internal_names(names, timeout).await;
    if internal.is_empty() {
        return;
    }
    let before = list.candidates.len();
    list.candidates
        .retain(|candidate| !internal.contains(&candidate.host.to_ascii_lowercase()));
    let refused = (before - list.candidates.len()) as u32;
    *list.dropped.entry(EntryError::PrivateHost).or_default() += refused;
}

/// Whether `host` is a name (not an address literal, which the host policy judged already).
fn is_name(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_err()
}

/// The names among `names` that resolve to at least one internal address.
async fn internal_names(names: BTreeSet<String>, timeout: Duration) -> HashSet<String> {
    let mut internal = HashSet::new();
    let mut lookups = JoinSet::new();
    let mut names = names.into_iter();
    loop {
        while lookups.len() < CONCURRENT_LOOKUPS {
            let Some(name) = names.next() else { break };
            lookups.spawn(async move {
                let lookup = tokio::net::lookup_host((name.clone(), 0));
                let found = tokio::time::timeout(timeout, lookup).await;
                let inside = match found {
                    Ok(Ok(mut addrs)) => addrs.any(|addr| is_internal_address(addr.ip())),
                    // Not resolvable now: the checker's own lookup decides at dial time.
                    _ => false,
                };
                (name, inside)
            });
        }
        let Some(done) = lookups.join_next().await else {
            break;
        };
        if let Ok((name, true)) = done {
            internal.insert(name);
        }
    }
    internal
}
