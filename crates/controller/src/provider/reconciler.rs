//! One upstream's reconciler: fetch every page (or take the static list), parse, upsert in
//! chunks, record the outcome, and pace the next round (interval + jitter, or backoff on failure).

use super::backconnect::SessionKeeper;
use super::entry::{EntryDefaults, ParsedList};
pub use super::failure::RoundError;
use super::fetch::VendorClient;
use super::hygiene::HostPolicy;
use super::pages::Walk;
use super::resolve;
use super::session_health::SessionHealth;
use super::status::StatusBoard;
use super::text::parse_line;
use crate::clock::SharedClock;
use crate::config::{ProviderKind, UpstreamConfig};
use crate::jitter;
use crate::leadership::job::LeaderJob;
use proxypool_core::{
    ActivityPool, Candidate, Credentials, FetchedBatch, LockExt, UnixMillis, UpsertReport,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Candidates per upsert call: small enough that one store call stays short.
pub const UPSERT_CHUNK: usize = 1_000;
/// First retry after a failed round; doubles up to the fetch interval.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundOutcome {
    pub fetched: u32,
    pub report: UpsertReport,
    /// Entries dropped while parsing, by reason.
    pub parse_dropped: BTreeMap<String, u32>,
    /// Of those, the entries the host policy refused (`host_not_allowed`, `private_host`).
    pub refused: u32,
    /// Fields of kept entries left out because they could not be read, by reason.
    pub ignored: BTreeMap<String, u32>,
}

/// Reconciles one upstream.
#[derive(Debug)]
pub struct Reconciler {
    upstream: Arc<UpstreamConfig>,
    store: Arc<dyn ActivityPool>,
    clock: SharedClock,
    client: VendorClient,
    board: Arc<StatusBoard>,
    /// A term began and the board has not yet taken the store's copy of the status.
    adopt_stored: bool,
    defaults: EntryDefaults,
    run_id: String,
    round: AtomicU64,
    /// Consecutive failed rounds (the backoff).
    failures: u32,
    /// A backconnect upstream's live sessions (held only between store calls).
    sessions: Option<Mutex<SessionKeeper>>,
    /// The checker's failed checks of those sessions.
    session_health: Arc<SessionHealth>,
}

impl Reconciler {
    pub fn new(
        upstream: Arc<UpstreamConfig>,
        store: Arc<dyn ActivityPool>,
        clock: SharedClock,
        client: VendorClient,
        board: Arc<StatusBoard>,
    ) -> Self {
        let defaults = EntryDefaults {
            protocol: upstream.defaults.protocol,
            region: upstream.defaults.region.clone(),
            carrier: upstream.defaults.carrier.clone(),
            credentials: upstream.credentials.as_ref().and_then(|c| {
                c.password
                    .plain()
                    .map(|p| Credentials::new(c.username.clone(), p.expose()))
            }),
            hosts: (upstream.provider.kind == ProviderKind::Http).then(|| {
                HostPolicy::new(
                    &upstream.provider.allowed_hosts,
                    upstream.provider.allow_private_hosts,
                )
            }),
        };
        if upstream.provider.kind == ProviderKind::Http
            && upstream
                .provider
                .url
                .as_deref()
                .is_some_and(|url| url.starts_with("http://"))
        {
            tracing::warn!(
                upstream = %upstream.id,
                "vendor list over plain http:// (allow_plaintext): its authorization and \
                 entries cross the network in clear"
            );
        }
        let sessions = SessionKeeper::new(&upstream).map(Mutex::new);
        Reconciler {
            upstream,
            store,
            clock,
            client,
            board,
            adopt_stored: true,
            defaults,
            run_id: jitter::hex_id(),
            round: AtomicU64::new(0),
            failures: 0,
            sessions,
            session_health: Arc::default(),
        }
    }

    /// Takes the checker's failed checks of this upstream's sessions from `health` (the
    /// one the controller's checker writes to).
    pub fn with_session_health(mut self, health: Arc<SessionHealth>) -> Self {
        self.session_health = health;
        self
    }

    /// Takes the stored status of this upstream into the board once per term, so totals
    /// and the last outcome survive a change of leader.
    async fn adopt_stored_status(&mut self) {
        if !self.adopt_stored {
            return;
        }
        match self.store.provider_statuses().await {
            Ok(statuses) => {
                if let Some(stored) = statuses
                    .into_iter()
                    .find(|s| s.upstream.as_ref() == Some(&self.upstream.id))
                {
                    self.board.adopt(stored);
                }
                self.adopt_stored = false;
            }
            Err(e) => tracing::debug!(upstream = %self.upstream.id, "stored status unread: {e}"),
        }
    }

    /// One round: fetch, parse, upsert; the status board records the outcome either way,
    /// and the store gets the board's entry (what every controller shows).
    pub async fn reconcile_once(&self) -> Result<RoundOutcome, RoundError> {
        let id = &self.upstream.id;
        let attempt = self.clock.now();
        let started = std::time::Instant::now();
        let result = self.round_inner().await;
        let elapsed = started.elapsed();
        // Parse and validation drops together, by reason (the board and the metrics
        // show the same names).
        let dropped = result.as_ref().ok().map(|outcome| {
            let mut dropped = outcome.parse_dropped.clone();
            for (reason, n) in &outcome.report.dropped {
                let name = serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{reason:?}"));
                *dropped.entry(name).or_default() += n;
            }
            dropped
        });
        match (&result, &dropped) {
            (Ok(outcome), Some(dropped)) => crate::metrics::provider_round(
                id,
                "success",
                elapsed,
                Some((&outcome.report, dropped)),
            ),
            (Err(e), _) => crate::metrics::provider_round(id, e.kind(), elapsed, None),
            (Ok(_), None) => {}
        }
        let status = self.board.update(id, |s| {
            s.last_attempt_ms = Some(attempt);
            s.total_fetches += 1;
            match &result {
                Ok(outcome) => {
                    s.last_success_ms = Some(attempt);
                    s.last_error = None;
                    s.consecutive_failures = 0;
                    s.last_fetched = outcome.fetched;
                    s.last_inserted = outcome.report.inserted;
                    s.last_refreshed = outcome.report.refreshed;
                    s.last_over_max_size = outcome.report.over_max_size;
                    s.last_foreign_duplicates = outcome.report.foreign_duplicates;
                    let dropped = dropped.clone().unwrap_or_default();
                    s.total_inserted += u64::from(outcome.report.inserted);
                    s.total_dropped += u64::from(dropped.values().sum::<u32>());
                    s.last_refused = outcome.refused;
                    s.total_refused += u64::from(outcome.refused);
                    s.last_dropped = dropped;
                    s.total_ignored += u64::from(outcome.ignored.values().sum::<u32>());
                    s.last_ignored = outcome.ignored.clone();
                }
                Err(e) => {
                    s.last_error = Some(e.kind().to_owned());
                    s.consecutive_failures = s.consecutive_failures.saturating_add(1);
                    s.total_failures += 1;
                }
            }
        });
        if let Err(e) = self
            .store
            .put_provider_status(self.clock.now(), &status)
            .await
        {
            tracing::warn!(upstream = %id, "provider status not stored: {e}");
        }
        match &result {
            Ok(outcome) => tracing::debug!(
                upstream = %id,
                fetched = outcome.fetched,
                inserted = outcome.report.inserted,
                refreshed = outcome.report.refreshed,
                "provider round done"
            ),
            // The URL is not logged: vendors often put API keys in it.
            Err(e) => tracing::warn!(upstream = %id, kind = e.kind(), "provider round failed: {e}"),
        }
        result
    }

    async fn round_inner(&self) -> Result<RoundOutcome, RoundError> {
        let provider = &self.upstream.provider;
        let (parsed, now) = match provider.kind {
            ProviderKind::Backconnect => return self.backconnect_round().await,
            ProviderKind::Static => {
                let mut list = ParsedList::default();
                for entry in &provider.proxies {
                    if let Some(entry) = parse_line(entry, &self.defaults) {
                        list.push(entry);
                    }
                }
                (list, self.clock.now())
            }
            ProviderKind::Http => {
                let walk = Walk {
                    client: &self.client,
                    provider,
                    defaults: &self.defaults,
                    clock: &self.clock,
                };
                let mut list = walk.read().await?;
                let now = self.clock.now();
                if self
                    .defaults
                    .hosts
                    .as_ref()
                    .is_some_and(|hosts| hosts.refuses_internal())
                {
                    resolve::drop_internal_names(&mut list, provider.timeout.as_duration()).await;
                }
                (list, now)
            }
        };
        let fetched =
            (parsed.candidates.len() + parsed.dropped.values().sum::<u32>() as usize) as u32;
        let refused = parsed
            .dropped
            .iter()
            .filter(|(reason, _)| reason.is_refusal())
            .map(|(_, n)| n)
            .sum();
        if refused > 0 {
            tracing::warn!(
                upstream = %self.upstream.id,
                refused,
                "vendor list entries refused by allowed_hosts / allow_private_hosts"
            );
        }
        let parse_dropped = parsed
            .dropped
            .iter()
            .map(|(reason, n)| (reason.as_str().to_owned(), *n))
            .collect();
        let ignored: BTreeMap<String, u32> = parsed
            .ignored
            .iter()
            .map(|(reason, n)| (reason.as_str().to_owned(), *n))
            .collect();
        if !ignored.is_empty() {
            tracing::debug!(
                upstream = %self.upstream.id,
                ?ignored,
                "vendor list fields left out of kept entries"
            );
        }
        let report = self.upsert_all(now, parsed.candidates).await?;
        Ok(RoundOutcome {
            fetched,
            report,
            parse_dropped,
            refused,
            ignored,
        })
    }

    /// A backconnect upstream's round, group by group: retire the sessions that ended or
    /// failed their last `unhealthy_after` checks, refresh the live ones (the store's
    /// answer says how many of them are held), then start new ones until the group has its
    /// `count` of sessions nobody holds.
    async fn backconnect_round(&self) -> Result<RoundOutcome, RoundError> {
        let Some(keeper) = &self.sessions else {
            // Validation fills what the keeper needs; without it nothing can be rendered.
            return Err(RoundError::MalformedBody("backconnect"));
        };
        let now = self.clock.now();
        let groups = keeper.lock_or_recover().groups();
        let mut outcome = RoundOutcome::default();
        for group in 0..groups {
            let retire_after = self.upstream.health.unhealthy_after;
            let live =
                keeper
                    .lock_or_recover()
                    .live(group, now, &self.session_health, retire_after);
            let mut held = 0;
            if !live.is_empty() {
                outcome.fetched += live.len() as u32;
                let report = self.upsert_all(now, live).await?;
                held = report.extracted_ignored as usize;
                merge(&mut outcome.report, report);
            }
            let started = keeper.lock_or_recover().top_up(group, held, now);
            if !started.is_empty() {
                outcome.fetched += started.len() as u32;
                merge(&mut outcome.report, self.upsert_all(now, started).await?);
            }
        }
        Ok(outcome)
    }

    /// Upserts in chunks; each chunk has its own operation id, and a chunk whose write may
    /// have happened (store unavailable) is retried once under the same id so it never
    /// counts twice.
    async fn upsert_all(
        &self,
        now: UnixMillis,
        candidates: Vec<Candidate>,
    ) -> Result<UpsertReport, RoundError> {
        let round = self.round.fetch_add(1, Ordering::Relaxed);
        let mut total = UpsertReport::default();
        let mut chunks: Vec<Vec<Candidate>> = Vec::new();
        let mut rest = candidates;
        while rest.len() > UPSERT_CHUNK {
            let tail = rest.split_off(UPSERT_CHUNK);
            chunks.push(std::mem::replace(&mut rest, tail));
        }
        chunks.push(rest);
        for (index, chunk) in chunks.into_iter().enumerate() {
            let batch = FetchedBatch {
                upstream: self.upstream.id.clone(),
                operation_id: Some(format!("{}-{round}-{index}", self.run_id)),
                ttl_ms: self.upstream.ttl.as_ms(),
                safety_margin_ms: self.upstream.safety_margin.as_ms(),
                max_size: self.upstream.max_size,
                default_max_sessions: self.upstream.max_sessions,
                candidates: chunk,
            };
            let report = match self.store.upsert(now, batch.clone()).await {
                Err(e) if e.is_unavailable() => self.store.upsert(now, batch).await,
                other => other,
            }
            .map_err(RoundError::Store)?;
            merge(&mut total, report);
        }
        Ok(total)
    }
}

/// 1 s, 2 s, 4 s, … after consecutive failures, never longer than the normal interval.
pub(crate) fn backoff(failures: u32, interval: Duration) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1 << exponent).min(interval)
}

fn merge(total: &mut UpsertReport, report: UpsertReport) {
    total.inserted += report.inserted;
    total.refreshed += report.refreshed;
    total.foreign_duplicates += report.foreign_duplicates;
    total.extracted_ignored += report.extracted_ignored;
    total.over_max_size += report.over_max_size;
    for (reason, n) in report.dropped {
        *total.dropped.entry(reason).or_default() += n;
    }
}

impl LeaderJob for Reconciler {
    const NAME: &'static str = "reconciler";

    fn begin_term(&mut self, store: Arc<dyn ActivityPool>) {
        self.store = store;
        self.adopt_stored = true;
    }

    /// After a success the next fetch is an interval (plus jitter) away; after failures
    /// it backs off from 1 s up to the interval.
    async fn round(&mut self) -> Duration {
        self.adopt_stored_status().await;
        let interval = self.upstream.provider.interval.as_duration();
        let jitter_max = self.upstream.provider.jitter.as_duration();
        match self.reconcile_once().await {
            Ok(_) => {
                self.failures = 0;
                interval + jitter::up_to(jitter_max)
            }
            Err(_) => {
                self.failures = self.failures.saturating_add(1);
                backoff(self.failures, interval) + jitter::up_to(jitter_max / 4)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_interval() {
        let interval = Duration::from_secs(10);
        assert_eq!(backoff(1, interval), Duration::from_secs(1));
        assert_eq!(backoff(2, interval), Duration::from_secs(2));
        assert_eq!(backoff(4, interval), Duration::from_secs(8));
        assert_eq!(backoff(5, interval), interval);
        assert_eq!(backoff(u32::MAX, interval), interval);
    }
}
