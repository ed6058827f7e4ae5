//! The health checker: proves proxies work by going through them, and records it.
//!
//! Each round asks the store what is due (FETCHED first, then SUSPECT, then stale
//! re-checks), checks those proxies concurrently under a semaphore with a per-check
//! timeout ([`probe`]), and writes the results in batches per upstream (each upstream has
//! its own unhealthy threshold). Rounds run one after another, so a proxy is never checked
//! twice at once; a round is bounded by `round_size` and so lasts at most a few timeouts.
//!
//! A failed check is kept on its record as one of the bounded reasons of
//! [`proxypool_core::CheckFailure`] (shown by the admin listing), counted under that
//! reason, and logged by [`failure_log`] (a warning the first time per upstream and
//! reason).

mod failure_log;
pub mod probe;

use crate::clock::SharedClock;
use crate::config::{CheckerConfig, ProviderKind, UpstreamConfig};
use crate::leadership::job::LeaderJob;
use crate::provider::SessionHealth;
use failure_log::FailureLog;
use probe::ProbePlan;
use proxypool_core::{
    CheckOutcome, DueQuery, HealthBatch, HealthObservation, HealthStore, PoolResult, ProxyStatus,
    UpstreamId,
};
use proxypool_edge::{ClientTls, ClientTlsFiles};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// How one upstream's proxies are checked.
#[derive(Debug, Clone)]
struct UpstreamChecks {
    plan: Arc<ProbePlan>,
    recheck_after_ms: u64,
    unhealthy_after: u32,
    /// A backconnect upstream: its checks go to the session keeper too.
    backconnect: bool,
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckRound {
    /// Every observation made, in completion order.
    pub observations: Vec<HealthObservation>,
    pub applied: u32,
    pub ignored: u32,
}

/// The checker.
#[derive(Debug)]
pub struct Checker {
    store: Arc<dyn HealthStore>,
    clock: SharedClock,
    config: CheckerConfig,
    upstreams: HashMap<UpstreamId, UpstreamChecks>,
    semaphore: Arc<Semaphore>,
    /// Where backconnect sessions' checks go, for their keeper.
    session_health: Arc<SessionHealth>,
    failure_log: FailureLog,
}

impl Checker {
    pub fn new(
        store: Arc<dyn HealthStore>,
        clock: SharedClock,
        config: CheckerConfig,
        upstreams: &[UpstreamConfig],
    ) -> Self {
        let upstreams = upstreams
            .iter()
            .map(|u| {
                let checks = UpstreamChecks {
                    plan: Arc::new(
                        ProbePlan::new(
                            &u.health.targets,
                            u.health.via,
                            u.health.max_latency.map(|m| m.as_duration()),
                        )
                        .refusing_internal(crate::upstream_tls::refuses_internal(u))
                        .with_tls(crate::upstream_tls::trust_of(u), target_trust(u)),
                    ),
                    recheck_after_ms: u.health.interval.as_ms(),
                    unhealthy_after: u.health.unhealthy_after,
                    backconnect: u.provider.kind == ProviderKind::Backconnect,
                };
                (u.id.clone(), checks)
            })
            .collect();
        Checker {
            semaphore: Arc::new(Semaphore::new(config.concurrency)),
            store,
            clock,
            config,
            upstreams,
            session_health: Arc::default(),
            failure_log: FailureLog::default(),
        }
    }

    /// Tells `health` every check of a backconnect upstream's session (the registry the
    /// reconcilers read).
    pub fn with_session_health(mut self, health: Arc<SessionHealth>) -> Self {
        self.session_health = health;
        self
    }

    /// Checks what is due now and writes the results.
    pub async fn check_round(&self) -> PoolResult<CheckRound> {
        let now = self.clock.now();
        let recheck_after_ms = self
            .upstreams
            .values()
            .map(|u| u.recheck_after_ms)
            .min()
            .unwrap_or(30_000);
        let due = self
            .store
            .due_for_check(
                now,
                DueQuery {
                    limit: self.config.round_size,
                    recheck_after_ms,
                },
            )
            .await?;

        let timeout = self.config.timeout.as_duration();
        let mut tasks = JoinSet::new();
        for record in due {
            let Some(checks) = self.upstreams.get(&record.upstream) else {
                continue; // an upstream no longer configured: its proxies just expire
            };
            let recently_checked = matches!(
                record.status,
                ProxyStatus::Available | ProxyStatus::Unhealthy
            ) && record
                .health
                .checked_at_ms
                .is_some_and(|at| at.saturating_add(checks.recheck_after_ms) > now);
            if recently_checked {
                continue;
            }
            let plan = checks.plan.clone();
            let semaphore = self.semaphore.clone();
            let clock = self.clock.clone();
            tasks.spawn(async move {
                // Closed only if the checker is gone; then the check is moot.
                let _permit = semaphore.acquire_owned().await.ok()?;
                let checked_at_ms = clock.now();
                let started = std::time::Instant::now();
                let checked = probe::check(&record, &plan, timeout).await;
                crate::metrics::health_check(
                    &record.upstream,
                    checked.as_ref().err().map(|f| f.reason),
                    started.elapsed(),
                );
                let outcome = match &checked {
                    Ok(latency_ms) => CheckOutcome::Success {
                        latency_ms: *latency_ms,
                    },
                    Err(failed) => CheckOutcome::failure(failed.reason),
                };
                let observation = HealthObservation {
                    proxy_id: record.id.clone(),
                    checked_at_ms,
                    outcome,
                };
                Some((record, observation, checked.err()))
            });
        }

        let mut round = CheckRound::default();
        let mut pending: HashMap<UpstreamId, Vec<HealthObservation>> = HashMap::new();
        while let Some(joined) = tasks.join_next().await {
            let Ok(Some((record, observation, failed))) = joined else {
                continue;
            };
            if let Some(failed) = &failed {
                self.failure_log.record(&record, failed);
            }
            let upstream = record.upstream;
            if self.upstreams.get(&upstream).is_some_and(|u| u.backconnect) {
                let ok = matches!(observation.outcome, CheckOutcome::Success { .. });
                self.session_health.observe(&observation.proxy_id, ok);
            }
            round.observations.push(observation.clone());
            let batch = pending.entry(upstream.clone()).or_default();
            batch.push(observation);
            if batch.len() >= self.config.write_batch {
                let batch = std::mem::take(batch);
                self.write(&upstream, batch, &mut round).await?;
            }
        }
        for (upstream, batch) in pending {
            if !batch.is_empty() {
                self.write(&upstream, batch, &mut round).await?;
            }
        }
        Ok(round)
    }

    async fn write(
        &self,
        upstream: &UpstreamId,
        observations: Vec<HealthObservation>,
        round: &mut CheckRound,
    ) -> PoolResult<()> {
        let unhealthy_after_failures = self
            .upstreams
            .get(upstream)
            .map_or(3, |u| u.unhealthy_after);
        let report = self
            .store
            .apply_health(
                self.clock.now(),
                HealthBatch {
                    observations,
                    unhealthy_after_failures,
                },
            )
            .await?;
        round.applied += report.applied;
        round.ignored += report.ignored;
        Ok(())
    }
}

impl LeaderJob for Checker {
    const NAME: &'static str = "checker";

    fn begin_term(&mut self, store: Arc<dyn proxypool_core::ActivityPool>) {
        self.store = store;
    }

    /// A round that checked something is followed at once by the next (more may be due);
    /// an empty or failed one waits `interval`.
    async fn round(&mut self) -> std::time::Duration {
        let idle = self.config.interval.as_duration();
        match self.check_round().await {
            Ok(round) if !round.observations.is_empty() => {
                tracing::debug!(
                    checked = round.observations.len(),
                    applied = round.applied,
                    "health round done"
                );
                std::time::Duration::ZERO
            }
            Ok(_) => idle,
            Err(e) => {
                tracing::warn!("health round failed: {e}");
                idle
            }
        }
    }
}

/// The trust for an upstream's `https://` check targets: its health `ca`, or the public
/// roots. A bundle that cannot be loaded fails those checks (`target_tls`), and is logged.
fn target_trust(upstream: &UpstreamConfig) -> Result<ClientTls, String> {
    let files = ClientTlsFiles {
        ca: upstream.health.ca.clone(),
        cert: None,
        key: None,
    };
    ClientTls::load(&files).map_err(|error| {
        tracing::error!(upstream = %upstream.id, %error, "the health check CA bundle cannot be loaded");
        error.to_string()
    })
}
