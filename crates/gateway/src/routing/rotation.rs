//! Rotation schedules beyond "a new pick per request": the same proxy for N requests
//! (`-rotate-N`, a client's `{ every_requests = N }`) or for T after it was chosen
//! (`-rotate-30s`, `{ every = "30s" }`), sessions with a sliding end (`-idle-MIN`),
//! `-newip` to leave the current proxy, and the least-used pick (`-rotate-least`,
//! `"least_used"`, `[gateway] rotation = "least_used"`).
//!
//! The state lives in the sticky table, so it has the table's bounds (overall and per
//! client, expired entries swept). A session is keyed by its id and its geo selectors
//! (`-city-`, `-state-`, `-asn-`), so `alice-city-boston-session-s1` and
//! `alice-city-austin-session-s1` are two sessions, each pinned in its own city; a
//! rotation without a session is keyed by (client, every selector but `newip`), so
//! `alice-region-us-rotate-5` and `alice-region-de-rotate-5` rotate independently. A
//! rotation key starts with `~` and a session's geo part follows a `~`, which session ids
//! never contain, so no two kinds of key can collide.
//!
//! Without a session the client's default rotation applies unless the username names its
//! own; with a session only the username's `-rotate-...` does, so an existing sticky
//! session never starts moving because a client default changed.
//!
//! A use is counted and a sliding end pushed when the pin is looked up, under the table's
//! lock, so concurrent requests of one key never lose a count.
//!
//! Least-used: every proxy slot carries a `RecentUse` (`crate::proxies::recent_use`), a
//! request count halved every `HALF_LIFE_MS` of the gateway's monotonic clock, packed with its epoch in one
//! `AtomicU64`: a compare-and-swap per routed request, one load per candidate of a pick,
//! no lock and no allocation.

use crate::config::Rotation;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::routing::select::{Eligibility, Pick, Picker};
use crate::routing::selector::Selectors;
use crate::routing::sticky::{Pin, StickyTable};
use crate::snapshot::{ClientEntry, SnapshotView, ViewProxy};
use proxypool_core::GeoValues;
use proxypool_core::control::ClientRotation;
use proxypool_core::{GeoLabel, ProxyId};
use std::borrow::Cow;
use std::fmt::Write as _;

/// The rotation a request runs under: the username's, or without a session the client's.
fn schedule(selectors: &Selectors, client: &ClientEntry) -> Option<ClientRotation> {
    match (selectors.rotate, &selectors.session) {
        (Some(rotate), _) => Some(rotate),
        (None, Some(_)) => None,
        (None, None) => client.rotation,
    }
}

/// The key of a rotation without a session: every selector that picks proxies, and the
/// schedule itself.
fn rotation_key(selectors: &Selectors, rotate: ClientRotation) -> String {
    let mut key = String::with_capacity(48);
    key.push('~');
    if let Some(region) = &selectors.region {
        let _ = write!(key, "r{region}~");
    }
    if let Some(carrier) = &selectors.carrier {
        let _ = write!(key, "c{carrier}~");
    }
    write_geo(&mut key, &selectors.geo);
    if let Some(upstream) = &selectors.upstream {
        let _ = write!(key, "u{upstream}~");
    }
    if let Some(protocol) = &selectors.protocol {
        let _ = write!(key, "p{protocol:?}~");
    }
    match rotate {
        ClientRotation::EveryRequests(n) => {
            let _ = write!(key, "n{n}");
        }
        ClientRotation::EveryMs(ms) => {
            let _ = write!(key, "t{ms}");
        }
        ClientRotation::PerRequest | ClientRotation::LeastUsed => {}
    }
    key
}

/// `label=value~` for each geo selector given (values are canonical: no `=` or `~`).
fn write_geo(key: &mut String, geo: &GeoValues) {
    for label in GeoLabel::ALL {
        if let Some(value) = geo.get(label) {
            let _ = write!(key, "{}={value}~", label.key());
        }
    }
}

/// The table key of a session: its id, and after a `~` its geo selectors when it has any
/// (only then does the key cost an allocation).
fn session_key<'a>(session: &'a str, geo: &GeoValues) -> Cow<'a, str> {
    if geo.is_empty() {
        return Cow::Borrowed(session);
    }
    let mut key = String::with_capacity(session.len() + 48);
    key.push_str(session);
    key.push('~');
    write_geo(&mut key, geo);
    Cow::Owned(key)
}

/// The table key of a request running under `rotate`, and whether it is a session's:
/// the session's key when it names one, else a rotation key for a schedule that keeps a
/// proxy (per-request and least-used keep none: `None`).
fn table_key(
    selectors: &Selectors,
    rotate: Option<ClientRotation>,
) -> (Option<Cow<'_, str>>, bool) {
    match (&selectors.session, rotate) {
        (Some(session), _) => (Some(session_key(session, &selectors.geo)), true),
        (None, Some(r @ (ClientRotation::EveryRequests(_) | ClientRotation::EveryMs(_)))) => {
            (Some(Cow::Owned(rotation_key(selectors, r))), false)
        }
        (None, _) => (None, false),
    }
}

/// The key a request's pin is kept under, as [`Plan::lookup`] would look it up (the same
/// builders, so the fleet's owner of a key and the table's key cannot drift); `None` when
/// nothing is pinned for it (no session, and no schedule beyond per-request or
/// least-used), so the request is routed wherever it lands. `-newip` leaves the key's pin
/// and so keeps its key. The fleet owner of a request is chosen by (client, this key).
pub(crate) fn fleet_key(auth: &Authenticated) -> Option<Cow<'_, str>> {
    let selectors = &auth.selectors;
    table_key(selectors, schedule(selectors, &auth.client)).0
}

/// One request's rotation: what to look up, what it found, how to pick and what to store.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    /// The table key (a session id or a rotation key); `None` = nothing is pinned.
    key: Option<Cow<'a, str>>,
    is_session: bool,
    rotate: Option<ClientRotation>,
    /// The pin to use first (its use already counted).
    pub pin: Option<Pin>,
    /// The pin being left (rotation due, or `-newip`): its end is kept and its proxy is
    /// avoided when another is eligible.
    left: Option<Pin>,
    /// The header outcome before any dial.
    pub outcome: SessionOutcome,
}

/// What the lookup decided under the table's lock.
enum Found {
    Use(Pin),
    Leave(Pin),
}

impl<'a> Plan<'a> {
    /// Looks the request's key up; counts the use and pushes a sliding end when the pin
    /// stays, or leaves it when its rotation is due or the request says `-newip`.
    pub(crate) fn lookup(table: &StickyTable, auth: &'a Authenticated, now_ms: u64) -> Self {
        let selectors = &auth.selectors;
        let rotate = schedule(selectors, &auth.client);
        let (key, is_session) = table_key(selectors, rotate);
        let mut plan = Plan {
            key: None,
            is_session,
            rotate,
            pin: None,
            left: None,
            outcome: SessionOutcome::NoSession,
        };
        let Some(key) = key else {
            return plan;
        };
        let newip = selectors.newip;
        let found = table.update(auth.client.id.as_str(), &key, now_ms, |pin| {
            let due = newip
                || match rotate {
                    Some(ClientRotation::EveryRequests(n)) => pin.uses >= n,
                    Some(ClientRotation::EveryMs(ms)) => now_ms >= pin.since_ms.saturating_add(ms),
                    _ => false,
                };
            if due {
                return Found::Leave(pin.clone());
            }
            pin.uses = pin.uses.saturating_add(1);
            if pin.idle_ms > 0 {
                pin.expires_at_ms = now_ms.saturating_add(pin.idle_ms);
            }
            Found::Use(pin.clone())
        });
        match found {
            Some(Found::Use(pin)) => {
                plan.pin = Some(pin);
                plan.outcome = SessionOutcome::Pinned;
            }
            Some(Found::Leave(pin)) => {
                plan.left = Some(pin);
                plan.outcome = SessionOutcome::Reassigned;
            }
            None => plan.outcome = SessionOutcome::New,
        }
        plan.key = Some(key);
        plan.outcome = plan.outcome_of(plan.outcome);
        plan
    }

    /// The outcome to tell the client: a rotation key without a session is no session.
    pub(crate) fn outcome_of(&self, outcome: SessionOutcome) -> SessionOutcome {
        if self.is_session {
            outcome
        } else {
            SessionOutcome::NoSession
        }
    }

    /// Picks a proxy by the request's strategy, away from the proxy being left when
    /// another one is eligible.
    pub(crate) fn pick(
        &self,
        picker: &Picker,
        view: &SnapshotView,
        client: &ClientEntry,
        selectors: &Selectors,
        tried: &[u32],
        when: Eligibility,
    ) -> Option<Pick> {
        let rotation = match self.rotate {
            Some(ClientRotation::LeastUsed) => Some(Rotation::LeastUsed),
            _ => None,
        };
        if let Some(avoid) = self
            .left
            .as_ref()
            .and_then(|left| view.index_of(&left.proxy))
            .filter(|index| !tried.contains(index))
        {
            // Only when a pin is being left, so the common pick allocates nothing here.
            let mut avoiding = Vec::with_capacity(tried.len() + 1);
            avoiding.extend_from_slice(tried);
            avoiding.push(avoid);
            if let Some(pick) = picker.pick(view, client, selectors, &avoiding, when, rotation) {
                return Some(pick);
            }
        }
        picker.pick(view, client, selectors, tried, when, rotation)
    }

    /// The request went through `proxy`: counts it for least-used, and pins it when it is
    /// not the proxy the key already holds.
    pub(crate) fn settle(
        &self,
        table: &StickyTable,
        auth: &Authenticated,
        proxy: &ViewProxy,
        when: Eligibility,
        default_sesstime_minutes: u32,
        per_client: usize,
    ) -> Result<(), Refusal> {
        proxy.slot.recent.record(when.mono_ms);
        let Some(key) = &self.key else {
            return Ok(());
        };
        if self.pin.as_ref().is_some_and(|p| p.proxy == proxy.id) {
            return Ok(());
        }
        let now_ms = when.now_ms;
        let pin = self.fresh_pin(auth, proxy.id.clone(), now_ms, default_sesstime_minutes);
        table
            .put(auth.client.id.as_str(), key, pin, now_ms, per_client)
            .map_err(|_| Refusal::SessionTableFull)
    }

    fn fresh_pin(
        &self,
        auth: &Authenticated,
        proxy: ProxyId,
        now_ms: u64,
        default_sesstime_minutes: u32,
    ) -> Pin {
        let minutes = |m: u32| u64::from(m) * 60_000;
        // The pin being replaced: a moved pin keeps its key's end (a session's sesstime
        // runs from its start whichever proxy carries it).
        let previous = self.pin.as_ref().or(self.left.as_ref());
        let idle_ms = if self.is_session {
            auth.selectors.idle_minutes.map_or(0, minutes)
        } else {
            // A rotation key ends once unused for as long as a default session or one
            // period of its schedule, so abandoned keys are swept.
            let period = match self.rotate {
                Some(ClientRotation::EveryMs(ms)) => ms,
                _ => 0,
            };
            minutes(default_sesstime_minutes).max(period)
        };
        let expires_at_ms = match previous {
            _ if idle_ms > 0 => now_ms.saturating_add(idle_ms),
            Some(previous) => previous.expires_at_ms,
            None => {
                let sesstime = auth
                    .selectors
                    .sesstime_minutes
                    .unwrap_or(default_sesstime_minutes);
                now_ms.saturating_add(minutes(sesstime))
            }
        };
        Pin {
            idle_ms,
            ..Pin::new(proxy, expires_at_ms, now_ms)
        }
    }
}

/// What happened to the request's sticky session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionOutcome {
    /// The request named no session.
    NoSession,
    /// A new session was pinned.
    New,
    /// The session's proxy was used.
    Pinned,
    /// The session's proxy left (or failed); the session now uses another one.
    Reassigned,
}

impl SessionOutcome {
    /// The `X-Proxypool-Session` value, if any.
    pub(crate) fn header_value(self) -> Option<&'static str> {
        match self {
            SessionOutcome::NoSession => None,
            SessionOutcome::New => Some("new"),
            SessionOutcome::Pinned => Some("pinned"),
            SessionOutcome::Reassigned => Some("reassigned"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keys_differ_by_selectors_and_schedule_and_never_look_like_sessions() {
        let us = Selectors {
            region: Some(proxypool_core::Label::new("us").unwrap()),
            ..Selectors::default()
        };
        let de = Selectors {
            region: Some(proxypool_core::Label::new("de").unwrap()),
            ..Selectors::default()
        };
        let five = ClientRotation::EveryRequests(5);
        assert_ne!(rotation_key(&us, five), rotation_key(&de, five));
        assert_ne!(
            rotation_key(&us, five),
            rotation_key(&us, ClientRotation::EveryRequests(6))
        );
        assert_ne!(
            rotation_key(&us, five),
            rotation_key(&us, ClientRotation::EveryMs(5))
        );
        let with_newip = Selectors {
            newip: true,
            ..us.clone()
        };
        assert_eq!(rotation_key(&us, five), rotation_key(&with_newip, five));
        assert!(rotation_key(&Selectors::default(), five).starts_with('~'));
    }

    /// A request of client `alice` (default rotation `rotation`) with the selectors of
    /// `rest`.
    fn request(rest: &str, rotation: Option<ClientRotation>) -> Authenticated {
        let client = ClientEntry {
            id: proxypool_core::ClientId::new("alice").unwrap(),
            project: None,
            password_hash: proxypool_core::SecretHash::derive("pw", "salt").unwrap(),
            allowed_upstreams: Vec::new(),
            allowed_regions: Vec::new(),
            ip_allowlist: Vec::new(),
            ip_allowlist_invalid: false,
            policy: crate::policy::limits::ClientPolicy::Unlimited,
            max_connections: 0,
            connections: std::sync::Arc::default(),
            allowed_ports: None,
            ban_statuses: None,
            rotation,
            inspection: proxypool_core::control::Inspection::Off,
            tls_names: Vec::new(),
        };
        Authenticated {
            client: std::sync::Arc::new(client),
            selectors: crate::routing::selector::parse_selectors(rest, 60).unwrap(),
            fleet_moved: false,
        }
    }

    #[test]
    fn the_fleet_key_is_the_table_key_and_none_when_nothing_is_pinned() {
        let key = |rest: &str, rotation| fleet_key(&request(rest, rotation)).map(Cow::into_owned);
        // Sessions: the table's key, geo included; `-newip` keeps the key it leaves.
        assert_eq!(key("session-s1", None).as_deref(), Some("s1"));
        assert_eq!(
            key("city-boston-session-s1", None),
            Some(session_key("s1", &request("city-boston", None).selectors.geo).into_owned())
        );
        assert_ne!(key("city-boston-session-s1", None), key("session-s1", None));
        assert_eq!(key("session-s1-newip", None), key("session-s1", None));
        // A session ignores the client's default rotation (as the table does).
        assert_eq!(
            key("session-s1", Some(ClientRotation::EveryRequests(3))).as_deref(),
            Some("s1")
        );
        // Rotation keys: the username's or the client's default schedule.
        let three = key("rotate-3", None).expect("-rotate-3 keeps a proxy for 3 requests");
        assert!(three.starts_with('~'), "{three}");
        assert_eq!(
            Some(three.clone()),
            key("", Some(ClientRotation::EveryRequests(3)))
        );
        assert_eq!(key("rotate-3-newip", None), Some(three.clone()));
        assert_ne!(key("rotate-30s", None), Some(three.clone()));
        assert_ne!(key("region-us-rotate-3", None), Some(three));
        // Nothing pinned: served where it lands.
        assert_eq!(key("", None), None);
        assert_eq!(key("newip", None), None);
        assert_eq!(key("rotate-least", None), None);
        assert_eq!(key("", Some(ClientRotation::PerRequest)), None);
        assert_eq!(key("", Some(ClientRotation::LeastUsed)), None);
    }

    #[test]
    fn geo_selectors_make_their_own_sessions_and_rotation_keys() {
        let parsed = |rest: &str| crate::routing::selector::parse_selectors(rest, 60).unwrap();
        let key = |rest: &str| {
            let selectors = parsed(rest);
            session_key(selectors.session.as_deref().unwrap(), &selectors.geo).into_owned()
        };
        assert_eq!(key("session-s1"), "s1", "no geo: the id alone");
        assert!(matches!(
            session_key("s1", &GeoValues::default()),
            Cow::Borrowed(_)
        ));
        let a = key("city-a-session-s1");
        let b = key("city-b-session-s1");
        assert_ne!(a, b);
        assert_ne!(a, key("session-s1"));
        assert_ne!(key("state-x-session-s1"), key("city-x-session-s1"));
        assert_ne!(key("asn-1-session-s1"), key("asn-2-session-s1"));
        assert_eq!(
            key("city-New_York-session-s1"),
            key("session-s1-city-new+york")
        );
        for k in [&a, &b, &key("session-s1")] {
            assert!(crate::routing::sticky::is_key_of_session(k, "s1"), "{k}");
            assert!(!crate::routing::sticky::is_key_of_session(k, "s"), "{k}");
        }
        let five = ClientRotation::EveryRequests(5);
        assert_ne!(
            rotation_key(&parsed("city-a"), five),
            rotation_key(&parsed("city-b"), five)
        );
        assert_ne!(
            rotation_key(&parsed("state-a"), five),
            rotation_key(&parsed("city-a"), five)
        );
        assert_ne!(
            rotation_key(&parsed("asn-7922"), five),
            rotation_key(&Selectors::default(), five)
        );
    }
}
