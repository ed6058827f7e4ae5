//! The pool store's identity and generation, what a loss of its memory looks like, and the
//! rule that keeps exclusivity through one.
//!
//! A shared pool store (Redis) can come back without what it knew: an empty data directory,
//! a replica that had not caught up, a restore from an old backup. Every proxy it had
//! handed out would then look fresh, and the next fetch would hand the same proxies out
//! again. So the store carries a [`StoreMark`]: an identity made when the store is first
//! used (and again after each loss) and a generation that only grows. Every role
//! remembers the identity and the highest generation it has seen ([`Expectation`]) and
//! every store call is checked against it, atomically with the call: a store whose
//! identity vanished or changed, or whose generation went backwards, refuses the call with
//! `Unavailable::StoreLost` ([`LossReason`]).
//!
//! The identity and the highest generation also live in a durable [`StoreLedger`]
//! (PostgreSQL or SQLite, next to the quota), so a loss is recognised even when every
//! controller restarted with the store. After a loss the store starts a new incarnation
//! with a [`Recovery`]: a proxy first stored during it is withheld (neither extracted nor
//! leased) until it cannot be in use any more, unless the vendor's data proves it was
//! issued after the loss.

use crate::error::PoolResult;
use crate::random::RandomError;
use crate::time::UnixMillis;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

pub use crate::store_loss::LossReason;

/// What a pool store says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMark {
    /// 32 hex digits, made from the operating system's CSPRNG for each incarnation.
    pub identity: String,
    /// Only grows within an incarnation; a new incarnation starts above the last one.
    pub generation: u64,
    /// The recovery the loss that started this incarnation began (none for a fresh store,
    /// or once an operator acknowledged the loss).
    pub recovery: Option<Recovery>,
}

impl StoreMark {
    /// A fresh identity at `generation` with `recovery`.
    pub fn fresh(generation: u64, recovery: Option<Recovery>) -> Result<StoreMark, RandomError> {
        Ok(StoreMark {
            identity: new_identity()?,
            generation,
            recovery,
        })
    }
}

/// A new store identity: 32 hex digits from the operating system's CSPRNG.
pub fn new_identity() -> Result<String, RandomError> {
    crate::random::hex(16)
}

/// Whether `identity` has the shape [`new_identity`] makes (a stored value that does not
/// is corrupt).
pub fn is_identity(identity: &str) -> bool {
    identity.len() == 32 && identity.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The rule of one recovery: what was stored before `lost_at_ms` may have been handed out,
/// and a proxy handed out stays in use at most `hold_ms` (the longest lifetime the
/// configuration gives a proxy: no vendor expiry extends a proxy past its upstream's `ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// When the loss was recognised. A proxy the vendor issued after this cannot have been
    /// in the lost store.
    pub lost_at_ms: UnixMillis,
    /// How long after `lost_at_ms` a proxy handed out before the loss may still be in use.
    pub hold_ms: u64,
}

impl Recovery {
    /// When a record first stored during this recovery may be handed out: `None` at once
    /// (the vendor says it was issued after the loss), else the end of the hold or the
    /// record's own hard expiry, whichever comes first.
    pub fn withheld_until(
        &self,
        issued_at_ms: Option<UnixMillis>,
        hard_expiry_ms: UnixMillis,
    ) -> Option<UnixMillis> {
        if issued_at_ms.is_some_and(|at| at > self.lost_at_ms) {
            return None;
        }
        Some(self.ends_at().min(hard_expiry_ms))
    }

    /// When nothing stored before the loss can be in use any more.
    pub fn ends_at(&self) -> UnixMillis {
        self.lost_at_ms.saturating_add(self.hold_ms)
    }
}

/// How long a client that found too little while records are withheld should wait: until
/// the first withheld record is released, at least a second and at most a minute (new
/// proxies may arrive sooner).
pub fn recovery_retry_after_ms(first_release_ms: UnixMillis, now: UnixMillis) -> u64 {
    first_release_ms.saturating_sub(now).clamp(1_000, 60_000)
}

/// What a role remembers of the store; every call is checked against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub identity: String,
    /// The highest generation the role knows the store reached.
    pub generation: u64,
}

impl Expectation {
    /// Judges `mark` (what the store carries) against this expectation: `None` when it
    /// matches.
    pub fn judge(&self, mark: Option<&StoreMark>) -> Option<LossReason> {
        let expected = self;
        match mark {
            None => Some(LossReason::Missing),
            Some(m) if m.identity != expected.identity => Some(LossReason::Replaced),
            Some(m) if m.generation < expected.generation => Some(LossReason::RolledBack),
            Some(_) => None,
        }
    }

    /// Matches no store: every call is refused (`StoreLost`) until the real expectation is
    /// set, so nothing reads or writes a store whose identity was not established.
    pub fn unestablished() -> Expectation {
        Expectation {
            identity: String::new(),
            generation: u64::MAX,
        }
    }
}

/// What a controller knows of its store, for readiness, `/v1/upstreams` and the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StoreStatus {
    /// The store's identity is not established yet (the first check has not answered).
    Unknown,
    /// The store is the one remembered.
    Ok { identity: String, generation: u64 },
    /// The store is the one remembered, recovering from an earlier loss: proxies that may
    /// have been handed out before it are withheld until `until_ms`.
    Recovering {
        identity: String,
        generation: u64,
        loss: Option<LossReason>,
        lost_at_ms: UnixMillis,
        until_ms: UnixMillis,
    },
    /// The store lost its memory and the new incarnation is not in place yet: every call
    /// is refused.
    Lost {
        reason: LossReason,
        since_ms: UnixMillis,
    },
}

impl StoreStatus {
    /// The identity of the store that serves, if one does.
    pub fn identity(&self) -> Option<&str> {
        match self {
            StoreStatus::Ok { identity, .. } | StoreStatus::Recovering { identity, .. } => {
                Some(identity)
            }
            StoreStatus::Unknown | StoreStatus::Lost { .. } => None,
        }
    }

    /// Whether the store can serve (recovering included).
    pub fn is_serving(&self) -> bool {
        matches!(
            self,
            StoreStatus::Ok { .. } | StoreStatus::Recovering { .. }
        )
    }
}

/// The store's identity and recovery, implemented by every activity-pool adapter.
///
/// Every other call of the pool, and of every handle made from it (fenced ones included),
/// is checked against the pool's [`Expectation`] atomically with the call, once one is
/// set; a mismatch changes nothing and is `Unavailable::StoreLost`.
#[async_trait]
pub trait StoreIdentity: Send + Sync + Debug {
    /// The store's mark, read without any expectation.
    async fn read_mark(&self) -> PoolResult<Option<StoreMark>>;

    /// Makes `mark` the store's current incarnation unless the store already carries its
    /// identity (then only a higher generation and the recovery are taken over). A new
    /// identity starts an empty pool: nothing of the previous incarnation is read again.
    /// Returns the mark the store carries afterwards.
    async fn install_mark(&self, now: UnixMillis, mark: &StoreMark) -> PoolResult<StoreMark>;

    /// Advances the generation by one, checked against the expectation like every call;
    /// returns the new generation.
    async fn advance_generation(&self, now: UnixMillis) -> PoolResult<u64>;

    /// Ends the current recovery early (an operator's acknowledgement): every withheld
    /// record is released by the following sweeps.
    async fn end_recovery(&self, now: UnixMillis) -> PoolResult<()>;

    /// Sets what every later call of this pool and of every handle made from it is checked
    /// against (`None`: nothing is checked).
    fn expect(&self, expectation: Option<Expectation>);
}

/// The durable record of a pool store, kept where a loss of the pool store cannot reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The identity of the store's current incarnation.
    pub identity: String,
    /// The highest generation the store is known to have reached.
    pub generation: u64,
    /// The recovery in force, if any.
    pub recovery: Option<Recovery>,
    /// Why the current incarnation was started (none for the first).
    pub loss: Option<LossReason>,
    /// Whether a controller has installed this incarnation in the store; until then the
    /// store may lack it without having lost anything.
    pub installed: bool,
}

/// Where the ledger of every pool store lives (the quota's database).
#[async_trait]
pub trait StoreLedger: Send + Sync + Debug {
    /// The entry of the pool named `pool`, if any.
    async fn load(&self, pool: &str) -> PoolResult<Option<LedgerEntry>>;

    /// Writes `entry` if the stored entry still names `expected` (`None`: there is no entry
    /// yet). False when someone changed it first; nothing is written then.
    async fn replace(
        &self,
        pool: &str,
        expected: Option<&str>,
        entry: &LedgerEntry,
    ) -> PoolResult<bool>;

    /// Raises the recorded generation of `identity` to `generation` (nothing when the entry
    /// names another identity or already records more).
    async fn raise_generation(&self, pool: &str, identity: &str, generation: u64)
    -> PoolResult<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_proxies_are_served_and_old_ones_wait_for_the_hold_or_their_expiry() {
        let recovery = Recovery {
            lost_at_ms: 10_000,
            hold_ms: 60_000,
        };
        assert_eq!(recovery.withheld_until(Some(10_001), 50_000), None);
        assert_eq!(recovery.withheld_until(Some(10_000), 50_000), Some(50_000));
        assert_eq!(recovery.withheld_until(None, 500_000), Some(70_000));
        assert_eq!(recovery.ends_at(), 70_000);
    }

    #[test]
    fn a_mark_is_judged_by_identity_then_generation() {
        let expected = Expectation {
            identity: new_identity().unwrap(),
            generation: 7,
        };
        assert!(is_identity(&expected.identity));
        let mut mark = StoreMark {
            identity: expected.identity.clone(),
            generation: 7,
            recovery: None,
        };
        assert_eq!(expected.judge(Some(&mark)), None);
        mark.generation = 6;
        assert_eq!(expected.judge(Some(&mark)), Some(LossReason::RolledBack));
        mark.identity = new_identity().unwrap();
        assert_eq!(expected.judge(Some(&mark)), Some(LossReason::Replaced));
        assert_eq!(expected.judge(None), Some(LossReason::Missing));
        for reason in [
            LossReason::Missing,
            LossReason::Replaced,
            LossReason::RolledBack,
            LossReason::Forced,
        ] {
            assert_eq!(LossReason::parse(reason.as_str()), Some(reason));
        }
    }
}
