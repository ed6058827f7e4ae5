//! [`StoreGuard`]: keeps the pool store the one this deployment remembers.
//!
//! Every controller runs one. At start it establishes the store's identity against the
//! durable ledger (`proxypool_core::StoreLedger`, in the quota's database) before anything
//! else calls the store; then, every `interval`, it advances the store's generation and
//! raises the ledger's record of it, so a store restored from an older copy shows a
//! generation below the ledger's. Every other call of the pool is checked against the
//! identity and generation the guard set (`StoreIdentity::expect`), atomically in the
//! store, so a loss is refused from the first call after it, on every controller.
//!
//! When the store is lost (no identity, another one, a generation gone back), or an
//! operator forced a recovery, the guard records a new incarnation in the ledger first
//! (a compare-and-set, so one controller wins), then installs it in the store: an empty
//! keyspace carrying a [`Recovery`] whose hold is the longest lifetime the configuration
//! gives a proxy. Until the hold ends, the store withholds every proxy it is given again
//! unless the vendor says it issued it after the loss. The ledger is written before the
//! store, so a loss that happens again during recovery, or a controller that restarts,
//! still finds the recovery.

use crate::clock::SharedClock;
use crate::metrics::{STORE_LOSSES, STORE_STATE};
use proxypool_core::{
    ActivityPool, Expectation, LedgerEntry, LossReason, PoolError, PoolResult, Recovery,
    StoreLedger, StoreMark, StoreStatus, Unavailable, UnixMillis,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// How often the guard advances the generation and checks the ledger.
pub const GUARD_INTERVAL: Duration = Duration::from_secs(1);

/// The hold of a recovery the configuration implies: the longest lifetime it gives a proxy
/// (every proxy's hard expiry is at most its fetch plus its upstream's `ttl`; a vendor's
/// own expiry only shortens it), so nothing handed out before a loss is in use after it.
/// Leases to gateways end before their proxy's expiry, so they are covered too.
pub fn recovery_hold_ms(config: &crate::config::Config) -> u64 {
    config
        .upstreams
        .iter()
        .map(|u| u.ttl.as_ms())
        .max()
        .unwrap_or(0)
}

/// Keeps the pool store the one this deployment remembers (module doc).
#[derive(Debug, Clone)]
pub struct StoreGuard {
    pool: Arc<dyn ActivityPool>,
    ledger: Arc<dyn StoreLedger>,
    /// The pool's name in the ledger (the store's key prefix).
    name: String,
    clock: SharedClock,
    /// The longest a proxy handed out before a loss may still be in use (shared with the
    /// running task, so a reload reaches it).
    hold_ms: Arc<AtomicU64>,
    status: Arc<watch::Sender<StoreStatus>>,
}

impl StoreGuard {
    pub fn new(
        pool: Arc<dyn ActivityPool>,
        ledger: Arc<dyn StoreLedger>,
        name: impl Into<String>,
        clock: SharedClock,
        hold_ms: u64,
    ) -> StoreGuard {
        StoreGuard {
            pool,
            ledger,
            name: name.into(),
            clock,
            hold_ms: Arc::new(AtomicU64::new(hold_ms)),
            status: Arc::new(watch::channel(StoreStatus::Unknown).0),
        }
    }

    /// What the guard knows of the store now.
    pub fn status(&self) -> StoreStatus {
        self.status.borrow().clone()
    }

    /// Watches the status.
    pub fn watch(&self) -> watch::Receiver<StoreStatus> {
        self.status.subscribe()
    }

    /// The longest lifetime the configuration gives a proxy changed (a reload). A
    /// recovery already started keeps its hold.
    pub fn set_hold(&self, hold_ms: u64) {
        self.hold_ms.store(hold_ms, Ordering::Relaxed);
    }

    fn hold(&self) -> u64 {
        self.hold_ms.load(Ordering::Relaxed)
    }

    fn publish(&self, status: StoreStatus) {
        let value = match &status {
            StoreStatus::Unknown => 0.0,
            StoreStatus::Ok { .. } => 1.0,
            StoreStatus::Recovering { .. } => 2.0,
            StoreStatus::Lost { .. } => 3.0,
        };
        metrics::gauge!(STORE_STATE).set(value);
        self.status.send_replace(status);
    }

    /// Brings the store in line with the ledger: adopts it, finishes an incarnation
    /// recorded but not installed, or records and installs a new one after a loss. Sets
    /// the pool's expectation and the status.
    pub async fn establish(&self) -> PoolResult<StoreStatus> {
        // A few rounds: each lost compare-and-set means another controller moved first,
        // and the next round takes over what it wrote.
        for _ in 0..4 {
            let now = self.clock.now();
            let entry = self.ledger.load(&self.name).await?;
            let mark = self.pool.read_mark().await?;
            let Some(entry) = entry else {
                // The first controller of this deployment: adopt the store's mark, or make
                // one for an empty store. A fresh mark is recorded in the ledger before it
                // is installed, as a recovery is: controllers starting together on an
                // empty store would otherwise each install their own, and the losers of
                // the ledger's compare-and-set would find the winner's identity replaced
                // and call it a loss. Recorded first, the losers install the winner's.
                let (entry, mark) = match mark {
                    Some(mark) => {
                        let entry = LedgerEntry {
                            identity: mark.identity.clone(),
                            generation: mark.generation,
                            recovery: mark.recovery,
                            loss: None,
                            installed: true,
                        };
                        (entry, Some(mark))
                    }
                    None => {
                        let fresh = StoreMark::fresh(1, None)
                            .map_err(|e| PoolError::store_down(e.to_string()))?;
                        let entry = LedgerEntry {
                            identity: fresh.identity.clone(),
                            generation: fresh.generation,
                            recovery: None,
                            loss: None,
                            installed: false,
                        };
                        (entry, None)
                    }
                };
                if !self.ledger.replace(&self.name, None, &entry).await? {
                    continue;
                }
                return match mark {
                    Some(mark) => Ok(self.adopt(now, &entry, &mark).await),
                    None => {
                        let mark = StoreMark {
                            identity: entry.identity.clone(),
                            generation: entry.generation,
                            recovery: None,
                        };
                        let mark = self.pool.install_mark(now, &mark).await?;
                        self.settle(now, entry, mark).await
                    }
                };
            };
            let remembered = Expectation {
                identity: entry.identity.clone(),
                generation: entry.generation,
            };
            match (remembered.judge(mark.as_ref()), mark) {
                (None, Some(mark)) => return self.settle(now, entry, mark).await,
                (_, _) if !entry.installed => {
                    // Recorded by a controller (or an operator) that has not installed it.
                    // It withholds for at least this controller's hold: a shorter one
                    // (another configuration, or an entry written with a stolen database
                    // credential) would release proxies that may still be in use.
                    if let Some(recovery) = entry.recovery.filter(|r| r.hold_ms < self.hold()) {
                        let longer = LedgerEntry {
                            recovery: Some(Recovery {
                                hold_ms: self.hold(),
                                ..recovery
                            }),
                            ..entry.clone()
                        };
                        self.ledger
                            .replace(&self.name, Some(&entry.identity), &longer)
                            .await?;
                        continue;
                    }
                    let mark = StoreMark {
                        identity: entry.identity.clone(),
                        generation: entry.generation,
                        recovery: entry.recovery,
                    };
                    let mark = self.pool.install_mark(now, &mark).await?;
                    return self.settle(now, entry, mark).await;
                }
                (reason, _) => {
                    // `judge` matches only an existing mark, so a mismatch or no mark.
                    let reason = reason.unwrap_or(LossReason::Missing);
                    self.publish(StoreStatus::Lost {
                        reason,
                        since_ms: now,
                    });
                    let next = StoreMark::fresh(
                        entry.generation.saturating_add(1),
                        Some(Recovery {
                            lost_at_ms: now,
                            hold_ms: self.hold(),
                        }),
                    )
                    .map_err(|e| PoolError::store_down(e.to_string()))?;
                    let recorded = LedgerEntry {
                        identity: next.identity.clone(),
                        generation: next.generation,
                        recovery: next.recovery,
                        loss: Some(reason),
                        installed: false,
                    };
                    if self
                        .ledger
                        .replace(&self.name, Some(&entry.identity), &recorded)
                        .await?
                    {
                        metrics::counter!(STORE_LOSSES, "reason" => reason.as_str()).increment(1);
                        tracing::error!(
                            pool = %self.name,
                            %reason,
                            hold_ms = self.hold(),
                            "the pool store lost its memory: starting a new incarnation; proxies \
                             that may have been handed out before are withheld until the hold ends"
                        );
                    }
                }
            }
        }
        Err(PoolError::store_down(
            "the store's identity kept changing while it was being established",
        ))
    }

    /// The store carries the ledger's incarnation: mark it installed, end a recovery whose
    /// hold is over (or that an operator acknowledged), and expect it.
    async fn settle(
        &self,
        now: UnixMillis,
        mut entry: LedgerEntry,
        mark: StoreMark,
    ) -> PoolResult<StoreStatus> {
        let over = entry.recovery.is_some_and(|r| r.ends_at() <= now);
        if !entry.installed || over {
            let identity = entry.identity.clone();
            entry.installed = true;
            if over {
                entry.recovery = None;
            }
            if !self
                .ledger
                .replace(&self.name, Some(&identity), &entry)
                .await?
            {
                return Err(PoolError::store_down("the store's ledger entry moved"));
            }
        }
        if entry.recovery.is_none() && mark.recovery.is_some() {
            self.pool.expect(Some(Expectation {
                identity: mark.identity.clone(),
                generation: mark.generation,
            }));
            self.pool.end_recovery(now).await?;
        }
        Ok(self.adopt(now, &entry, &mark).await)
    }

    async fn adopt(&self, now: UnixMillis, entry: &LedgerEntry, mark: &StoreMark) -> StoreStatus {
        let generation = mark.generation.max(entry.generation);
        self.pool.expect(Some(Expectation {
            identity: mark.identity.clone(),
            generation,
        }));
        let status = match entry.recovery {
            Some(r) if now < r.ends_at() => StoreStatus::Recovering {
                identity: mark.identity.clone(),
                generation,
                loss: entry.loss,
                lost_at_ms: r.lost_at_ms,
                until_ms: r.ends_at(),
            },
            _ => StoreStatus::Ok {
                identity: mark.identity.clone(),
                generation,
            },
        };
        self.publish(status.clone());
        status
    }

    /// One round: advance the generation and record it; on a loss (or a ledger that moved
    /// on), establish again.
    pub async fn round(&self) -> PoolResult<StoreStatus> {
        let identity = match self.status() {
            StoreStatus::Ok { identity, .. } | StoreStatus::Recovering { identity, .. } => identity,
            StoreStatus::Unknown | StoreStatus::Lost { .. } => return self.establish().await,
        };
        let now = self.clock.now();
        match self.pool.advance_generation(now).await {
            Ok(generation) => {
                self.pool.expect(Some(Expectation {
                    identity: identity.clone(),
                    generation,
                }));
                self.ledger
                    .raise_generation(&self.name, &identity, generation)
                    .await?;
                // The ledger decides recoveries (an operator's acknowledgement or forced
                // recovery, a hold that ended, another controller's new incarnation).
                self.establish().await
            }
            Err(PoolError::Unavailable(Unavailable::StoreLost(reason))) => {
                self.publish(StoreStatus::Lost {
                    reason,
                    since_ms: now,
                });
                self.establish().await
            }
            Err(e) => Err(e),
        }
    }

    /// Runs rounds every [`GUARD_INTERVAL`] until `stop` turns true.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            if let Err(e) = self.round().await {
                tracing::warn!(pool = %self.name, "store identity check failed: {e}");
            }
            tokio::select! {
                _ = tokio::time::sleep(GUARD_INTERVAL) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}
