//! A backconnect upstream's sessions as proxies of the pool.
//!
//! Each session is the vendor gateway's address under a username rendered with a fresh
//! session id, so it is a proxy of its own (its own id, exclusive like any other) whose
//! exit the vendor keeps for the session's life. The keeper holds the live sessions of
//! each group; a round drops the ones that ended (or are within the upstream's safety
//! margin of it), refreshes the rest, and starts new ones until each group has `count`
//! sessions nobody holds. Its memory is the leader's: after a change of leader the new
//! one starts its own sessions and the old ones run out in the store by their expiry.

use super::session_health::SessionHealth;
use crate::config::{BackconnectConfig, Placeholder, SessionGroup, UpstreamConfig};
use proxypool_config::backconnect::{lifetime_minutes, lifetime_seconds};
use proxypool_core::{
    Candidate, Credentials, GeoLabel, Protocol, ProxyId, UnixMillis, proxy_id_for,
};

/// Live sessions one group may have at once, as a multiple of its `count`: sessions
/// handed out stay until they end, and new ones replace them only this far.
const MAX_LIVE_PER_COUNT: usize = 4;

/// One session: its id, when it ends, and the proxy it is (rendered once, refreshed as is
/// every round).
#[derive(Debug, Clone)]
struct Session {
    id: String,
    ends_ms: UnixMillis,
    proxy: ProxyId,
    candidate: Candidate,
}

/// The live sessions of every group of one upstream.
#[derive(Debug)]
pub struct SessionKeeper {
    backconnect: BackconnectConfig,
    protocol: Protocol,
    account: String,
    password: String,
    safety_margin_ms: u64,
    groups: Vec<Vec<Session>>,
}

impl SessionKeeper {
    /// The keeper of a `backconnect` upstream (`None` for any other kind, or before the
    /// configuration's validation filled the templates and credentials).
    pub fn new(upstream: &UpstreamConfig) -> Option<Self> {
        let backconnect = upstream.provider.backconnect.clone()?;
        backconnect.templates.as_ref()?;
        let credentials = upstream.credentials.as_ref()?;
        let password = credentials.password.plain()?.expose().to_owned();
        Some(SessionKeeper {
            groups: vec![Vec::new(); backconnect.sessions.len()],
            backconnect,
            protocol: upstream.defaults.protocol,
            account: credentials.username.clone(),
            password,
            safety_margin_ms: upstream.safety_margin.as_ms(),
        })
    }

    /// How many groups there are.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Drops the sessions that ended (or will within the safety margin) and those whose
    /// last `retire_after` checks failed, and returns the live ones of `group`, to be
    /// refreshed.
    pub fn live(
        &mut self,
        group: usize,
        now: UnixMillis,
        health: &SessionHealth,
        retire_after: u32,
    ) -> Vec<Candidate> {
        let margin = self.safety_margin_ms;
        self.groups[group].retain(|s| {
            let ended = s.ends_ms <= now.saturating_add(margin);
            let failing = health.failures(&s.proxy) >= retire_after;
            if ended || failing {
                if failing && !ended {
                    tracing::info!(session = %s.id, "a backconnect session failed its checks; a new one takes its place");
                }
                health.forget(&s.proxy);
            }
            !(ended || failing)
        });
        self.groups[group]
            .iter()
            .map(|s| s.candidate.clone())
            .collect()
    }

    /// Starts sessions until `group` has its `count` of sessions nobody holds, given how
    /// many of its live ones are held (`held`), and returns the new ones.
    pub fn top_up(&mut self, group: usize, held: usize, now: UnixMillis) -> Vec<Candidate> {
        let count = self.backconnect.sessions[group].count as usize;
        let live = self.groups[group].len();
        let free = live.saturating_sub(held);
        let room = (count * MAX_LIVE_PER_COUNT).saturating_sub(live);
        let wanted = count.saturating_sub(free).min(room);
        let lifetime = self.backconnect.session_lifetime.as_ms();
        let mut started = Vec::with_capacity(wanted);
        for _ in 0..wanted {
            let digits = usize::from(self.backconnect.session_id_length);
            let Ok(mut id) = proxypool_core::random::hex(digits.div_ceil(2)) else {
                tracing::error!("no randomness for a session id; starting no session this round");
                break;
            };
            id.truncate(digits);
            let ends_ms = now.saturating_add(lifetime);
            if let Some(candidate) = self.candidate(group, &id, now, ends_ms) {
                let username = candidate.credentials.as_ref().map(|c| c.username.as_str());
                let proxy = proxy_id_for(
                    candidate.protocol,
                    &candidate.host,
                    candidate.port,
                    username,
                );
                started.push(candidate.clone());
                self.groups[group].push(Session {
                    id,
                    ends_ms,
                    proxy,
                    candidate,
                });
            }
        }
        started
    }

    /// The session as a proxy: the gateway's address, the credentials rendered as the
    /// vendor writes each value (the templates' transforms), the group's labels, the
    /// session's end as its expiry and its start as its issue time (a session started
    /// after a loss of the pool store is provably new).
    fn candidate(
        &self,
        group: usize,
        session_id: &str,
        started_ms: UnixMillis,
        ends_ms: UnixMillis,
    ) -> Option<Candidate> {
        let (username, password) = self.backconnect.templates.as_ref()?;
        let group_config: &SessionGroup = &self.backconnect.sessions[group];
        let lifetime = self.backconnect.session_lifetime;
        let (minutes, seconds) = (lifetime_minutes(lifetime), lifetime_seconds(lifetime));
        let value = |placeholder: Placeholder| -> Option<String> {
            match placeholder {
                Placeholder::Account => Some(self.account.clone()),
                Placeholder::Password => Some(self.password.clone()),
                Placeholder::Session => Some(session_id.to_owned()),
                Placeholder::Minutes => Some(minutes.to_string()),
                Placeholder::Seconds => Some(seconds.to_string()),
                own => group_config.value(own).map(str::to_owned),
            }
        };
        let (username, password) = match (username.render(value), password.render(value)) {
            (Ok(username), Ok(password)) => (username, password),
            (Err(why), _) | (_, Err(why)) => {
                tracing::error!(%why, "a backconnect template cannot be rendered");
                return None;
            }
        };
        let mut candidate = Candidate::new(
            self.protocol,
            self.backconnect.host.clone(),
            self.backconnect.port,
        );
        candidate.credentials = Some(Credentials::new(username, password));
        candidate.region = group_config.country.clone();
        candidate.carrier = group_config.carrier.clone();
        // The group's place as written (`New York`); the upsert stores it canonical, so the
        // gateway's selectors and the extraction filters find the session by it.
        for label in GeoLabel::ALL {
            if let Some(value) = group_config.geo(label) {
                candidate
                    .labels
                    .insert(label.key().to_owned(), value.to_owned());
            }
        }
        candidate.expires_at_ms = Some(ends_ms);
        candidate.issued_at_ms = Some(started_ms);
        Some(candidate)
    }
}
