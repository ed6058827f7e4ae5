//! A vendor's backconnect gateway, simulated: one proxy address where the username picks
//! the exit. `ACCOUNT[-country-CC][-state-S][-city-C][-asn-N][-session-ID][-sesstime-MINUTES]`
//! (the password is the account's): with a session id, the same exit for the session's
//! minutes from its first use (then a new one, as a real vendor's session ends); without
//! one, the next exit on every connection (rotating). The country, state, city and ASN are
//! taken and counted as written, not routed on.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How a backconnect gateway accepts usernames and where it sends them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackconnectConfig {
    /// The account part every username starts with.
    pub account: String,
    /// The account's password.
    pub password: String,
    /// The exits handed out (at least one).
    pub exits: Vec<Ipv4Addr>,
    /// A session's minutes when the username names none.
    pub default_minutes: u32,
}

/// What a username asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionRequest {
    pub country: Option<String>,
    /// The state, city and ASN as written (`city-new+york`), in the username's order.
    pub places: Vec<(String, String)>,
    pub session: Option<String>,
    pub minutes: Option<u32>,
}

impl SessionRequest {
    /// Parses `ACCOUNT[-key-value]...` for `account`; `None` for another account, an
    /// unknown key, a key without its value or minutes that are not a number.
    pub fn parse(username: &str, account: &str) -> Option<Self> {
        let rest = username.strip_prefix(account)?;
        let mut request = SessionRequest::default();
        if rest.is_empty() {
            return Some(request);
        }
        let mut parts = rest.strip_prefix('-')?.split('-');
        while let Some(key) = parts.next() {
            let value = parts.next().filter(|v| !v.is_empty())?;
            match key {
                "country" => request.country = Some(value.to_ascii_lowercase()),
                "state" | "city" | "asn" => request.places.push((key.into(), value.into())),
                "session" => request.session = Some(value.to_owned()),
                "sesstime" => request.minutes = Some(value.parse().ok().filter(|m| *m > 0)?),
                _ => return None,
            }
        }
        Some(request)
    }
}

/// The gateway's live sessions and its rotation.
#[derive(Debug)]
pub(super) struct Backconnect {
    config: BackconnectConfig,
    next: AtomicUsize,
    sessions: Mutex<HashMap<String, (Ipv4Addr, Instant)>>,
    countries: Mutex<HashMap<String, u64>>,
    places: Mutex<HashMap<String, u64>>,
}

impl Backconnect {
    pub(super) fn new(config: BackconnectConfig) -> Self {
        assert!(
            !config.exits.is_empty(),
            "a backconnect gateway needs exits"
        );
        Backconnect {
            config,
            next: AtomicUsize::new(0),
            sessions: Mutex::new(HashMap::new()),
            countries: Mutex::new(HashMap::new()),
            places: Mutex::new(HashMap::new()),
        }
    }

    /// The exit for these credentials now, or `None` when they are refused.
    pub(super) fn exit_for(&self, username: &str, password: &str) -> Option<Ipv4Addr> {
        if password != self.config.password {
            return None;
        }
        let request = SessionRequest::parse(username, &self.config.account)?;
        if let Some(country) = &request.country {
            *lock(&self.countries).entry(country.clone()).or_default() += 1;
        }
        for (key, value) in &request.places {
            *lock(&self.places)
                .entry(format!("{key}-{value}"))
                .or_default() += 1;
        }
        let Some(session) = request.session else {
            return Some(self.rotate());
        };
        let minutes = request.minutes.unwrap_or(self.config.default_minutes);
        let now = Instant::now();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, (_, ends)| *ends > now);
        if let Some((exit, _)) = sessions.get(&session) {
            return Some(*exit);
        }
        let exit = self.rotate();
        let ends = now + Duration::from_secs(u64::from(minutes) * 60);
        sessions.insert(session, (exit, ends));
        Some(exit)
    }

    /// Sessions alive now.
    pub(super) fn live_sessions(&self) -> usize {
        let now = Instant::now();
        lock(&self.sessions)
            .values()
            .filter(|(_, ends)| *ends > now)
            .count()
    }

    /// Connections that named each country.
    pub(super) fn countries(&self) -> HashMap<String, u64> {
        lock(&self.countries).clone()
    }

    /// Connections that named each state, city or ASN, as `key-value` (`city-new+york`).
    pub(super) fn places(&self) -> HashMap<String, u64> {
        lock(&self.places).clone()
    }

    fn rotate(&self) -> Ipv4Addr {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.config.exits[n % self.config.exits.len()]
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway() -> Backconnect {
        Backconnect::new(BackconnectConfig {
            account: "acct".into(),
            password: "pw".into(),
            exits: (1..=3).map(|n| Ipv4Addr::new(127, 0, 1, n)).collect(),
            default_minutes: 10,
        })
    }

    #[test]
    fn usernames_parse_in_the_vendors_syntax() {
        assert_eq!(
            SessionRequest::parse("acct-country-US-session-ab12-sesstime-5", "acct"),
            Some(SessionRequest {
                country: Some("us".into()),
                session: Some("ab12".into()),
                minutes: Some(5),
                ..SessionRequest::default()
            })
        );
        assert_eq!(
            SessionRequest::parse("acct-country-us-state-ny-city-new+york-asn-701", "acct")
                .unwrap()
                .places,
            [("state", "ny"), ("city", "new+york"), ("asn", "701")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(
            SessionRequest::parse("acct", "acct"),
            Some(SessionRequest::default())
        );
        for refused in [
            "other-session-x",
            "acct-session",
            "acct-colour-red",
            "acct-sesstime-soon",
            "acct-sesstime-0",
            "acctx",
        ] {
            assert_eq!(SessionRequest::parse(refused, "acct"), None, "{refused}");
        }
    }

    #[test]
    fn a_session_keeps_its_exit_and_no_session_rotates() {
        let gateway = gateway();
        let first = gateway.exit_for("acct-session-a", "pw").unwrap();
        for _ in 0..5 {
            assert_eq!(gateway.exit_for("acct-session-a", "pw"), Some(first));
        }
        let other = gateway.exit_for("acct-session-b", "pw").unwrap();
        assert_ne!(other, first);
        let rotating: Vec<Ipv4Addr> = (0..3)
            .map(|_| gateway.exit_for("acct-country-de", "pw").unwrap())
            .collect();
        assert_eq!(
            rotating
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len(),
            3
        );
        assert_eq!(gateway.exit_for("acct-session-a", "wrong"), None);
        assert_eq!(gateway.live_sessions(), 2);
        assert_eq!(gateway.countries().get("de"), Some(&3));
    }
}
