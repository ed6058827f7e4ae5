//! Client authentication: proxy credentials (HTTP `Proxy-Authorization: Basic` or SOCKS5
//! username/password) checked against the snapshot's clients, then the username's
//! selectors, the source IP allowlist and the client's allowed upstreams and regions.
//!
//! Order matters: the password is verified before any selector error is reported, so an
//! unauthenticated caller cannot probe which client ids exist. For the same reason an
//! unknown client id costs a hash too: the password is checked against a fixed dummy
//! hash, so the answer takes as long as for a known id with a wrong password.
//! A username longer than [`MAX_USERNAME`] bytes is refused before anything else, so
//! parsing one costs a bounded amount of work.

use crate::policy::limits::ClientPolicy;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::routing::selector::{MAX_USERNAME, parse_selectors, split_client};
use crate::snapshot::{ClientEntry, SnapshotView};
use proxypool_core::SecretHash;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

/// Stands in for the hash of a client that does not exist (a salt as long as a real one).
static DUMMY_HASH: LazyLock<SecretHash> = LazyLock::new(|| {
    SecretHash::derive("no such client", "dummysaltdummysalt").expect("a valid salt")
});

/// Authenticates `username`/`password` from `peer` against `view`.
pub(crate) fn authenticate(
    view: &SnapshotView,
    username: &str,
    password: &str,
    peer: IpAddr,
    max_sesstime_minutes: u32,
) -> Result<Authenticated, Refusal> {
    if username.len() > MAX_USERNAME {
        // Says nothing about which clients exist, so it may come before the password.
        return Err(Refusal::BadSelector(format!(
            "the username is longer than {MAX_USERNAME} bytes"
        )));
    }
    let known = split_client(username, |id| view.has_client(id))
        .and_then(|(id, rest)| view.client(id).map(|client| (client, rest)));
    if !password_matches(known.map(|(client, _)| &client.password_hash), password) {
        return Err(Refusal::AuthRequired);
    }
    let (client, rest) = known.ok_or(Refusal::AuthRequired)?;
    authorize(client, rest, Some(peer), max_sesstime_minutes)
}

/// What an authenticated `client` may ask for: its username's selectors (`rest`, after
/// the client id) parsed, the `inspect` rule, the source allowlist (`peer`; `None` when a
/// fleet member relays a request it checked already), a valid policy, and the upstream and
/// region it names allowed. One rule for the proxy listeners and the fleet's hop.
pub(crate) fn authorize(
    client: &Arc<ClientEntry>,
    rest: &str,
    peer: Option<IpAddr>,
    max_sesstime_minutes: u32,
) -> Result<Authenticated, Refusal> {
    let selectors = parse_selectors(rest, max_sesstime_minutes).map_err(Refusal::BadSelector)?;
    if selectors.inspect && client.inspection.is_off() {
        // Asking is not enough: the operator allows inspection per client.
        return Err(Refusal::BadSelector(
            "selector 'inspect': TLS inspection is off for this client".into(),
        ));
    }
    if let Some(peer) = peer
        && !client.ip_allowed(peer)
    {
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
        fleet_moved: false,
    })
}

/// Verifies `password` against `hash`, or against the dummy hash when there is no client
/// (and then refuses): one hash either way.
fn password_matches(hash: Option<&SecretHash>, password: &str) -> bool {
    #[cfg(test)]
    tests::VERIFICATIONS.with(|count| count.set(count.get() + 1));
    match hash {
        Some(hash) => hash.verify(password),
        None => {
            let _ = std::hint::black_box(DUMMY_HASH.verify(password));
            false
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::snapshot::SnapshotStore;
    use proxypool_core::control::{GatewayClient, WorkerSnapshot};
    use proxypool_core::{ClientId, SnapshotRef, SystemClock, WorkerId};
    use proxypool_snapshot::snapshot_checksum;
    use std::cell::Cell;

    thread_local! {
        /// Password verifications made on this thread.
        pub(crate) static VERIFICATIONS: Cell<usize> = const { Cell::new(0) };
    }

    fn view_with(clients: &[&str]) -> Arc<SnapshotView> {
        let worker = WorkerId::new("w").unwrap();
        let store = SnapshotStore::new(
            10,
            Default::default(),
            Arc::new(proxypool_throttle::MonotonicClock::new()),
            SystemClock::shared(),
        );
        let clients = clients
            .iter()
            .map(|id| GatewayClient {
                id: ClientId::new(*id).unwrap(),
                project: "p".into(),
                password_hash: SecretHash::derive("right", "salt1").unwrap(),
                allowed_upstreams: Vec::new(),
                allowed_regions: Vec::new(),
                ip_allowlist: Vec::new(),
                rate_limit: None,
                max_connections: 10,
                allowed_ports: None,
                ban_statuses: None,
                rotation: None,
                inspection: Default::default(),
                tls_names: Vec::new(),
            })
            .collect::<Vec<_>>();
        let checksum = snapshot_checksum(&[], &[], &clients, &Default::default(), None, &[]);
        store
            .install(
                WorkerSnapshot {
                    advisories: Default::default(),
                    worker,
                    session_id: "s".into(),
                    reference: SnapshotRef {
                        version: 1,
                        epoch: 1,
                        checksum,
                    },
                    generated_at_ms: 0,
                    max_staleness_ms: 60_000,
                    proxies: Vec::new(),
                    clients,
                    held: Vec::new(),
                    ticket_key: None,
                    upstream_tls: Vec::new(),
                },
                Vec::new,
            )
            .unwrap();
        store.view().unwrap()
    }

    /// Verifications `f` makes.
    fn verifications(f: impl FnOnce()) -> usize {
        let before = VERIFICATIONS.with(Cell::get);
        f();
        VERIFICATIONS.with(Cell::get) - before
    }

    #[test]
    fn an_unknown_client_id_costs_one_verification_like_a_known_one() {
        let view = view_with(&["alice"]);
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let auth = |user: &str, password: &str| authenticate(&view, user, password, peer, 60);
        for (user, password) in [
            ("alice", "wrong"),
            ("mallory", "wrong"),
            ("mallory-session-x", "right"),
            ("", ""),
        ] {
            assert_eq!(
                verifications(|| {
                    assert_eq!(auth(user, password).unwrap_err(), Refusal::AuthRequired);
                }),
                1,
                "{user:?} is verified once"
            );
        }
        assert_eq!(
            verifications(|| {
                auth("alice-session-x", "right").unwrap();
            }),
            1
        );
        // A selector error is reported only after the password was verified.
        assert_eq!(
            auth("alice-colour-red", "wrong").unwrap_err(),
            Refusal::AuthRequired
        );
    }

    #[test]
    fn an_over_long_username_is_refused_before_parsing_or_hashing() {
        let view = view_with(&["alice"]);
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let auth = |user: &str, password: &str| authenticate(&view, user, password, peer, 60);
        let huge = format!("alice-{}", "session-x-".repeat(6_600));
        let refusal = verifications(|| {
            let refusal = auth(&huge, "right").unwrap_err();
            assert!(
                matches!(&refusal, Refusal::BadSelector(m) if m.contains("longer than 256 bytes")),
                "{refusal:?}"
            );
        });
        assert_eq!(refusal, 0);
        let longest = format!("alice-session-{}", "x".repeat(MAX_USERNAME - 14));
        assert_eq!(longest.len(), MAX_USERNAME);
        assert!(
            matches!(auth(&longest, "right"), Err(Refusal::BadSelector(m)) if m.contains("session id"))
        );
    }
}
