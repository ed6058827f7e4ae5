//! The one error type every activity-pool port returns.
//!
//! Callers map it to protocol answers without knowing which store produced it: invalid input
//! is the caller's fault (400), not found and conflicts are about the state of one object
//! (404/409), insufficient inventory is a business answer (409), and *unavailable* means the
//! store could not decide (503): it is never folded into "no inventory".

use crate::store_loss::LossReason;
use std::fmt;

/// Why an operation conflicts with the current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conflict {
    /// The writer's worker session was replaced by a newer one.
    Fenced,
    /// The idempotency key was used before with a different request body.
    IdempotencyDigest,
    /// The idempotency key was used before for an extraction that can no longer be
    /// replayed (its proxies expired), and the key is still held for it.
    IdempotencyExpired,
    /// The proxy is owned by someone else, or the worker/epoch does not match.
    Ownership,
    /// The lease ran out (or was cut at `usable_until`) before it was renewed.
    LeaseExpired,
    /// A drain was acknowledged while connections were still active or reserved.
    NotDrained,
    /// A runtime report's sequence is not strictly greater than the last one.
    Sequence,
    /// A report or acknowledgement names a snapshot other than the one issued/acknowledged.
    Snapshot,
    /// The proxy is not in a state that allows the operation (e.g. not AVAILABLE).
    Status,
    /// A leader's write carried a term (a lease fencing token) that is no longer the live
    /// one: another controller leads now, or the lease lapsed.
    StaleTerm,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Conflict::Fenced => "worker session was replaced (fenced)",
            Conflict::IdempotencyDigest => "idempotency key reused with a different request",
            Conflict::IdempotencyExpired => {
                "idempotency key already used for an extraction that can no longer be replayed"
            }
            Conflict::Ownership => "ownership does not match (worker or epoch)",
            Conflict::LeaseExpired => "ownership lease expired",
            Conflict::NotDrained => "proxy still has active or reserved sessions",
            Conflict::Sequence => "report sequence is not strictly increasing",
            Conflict::Snapshot => "snapshot reference does not match",
            Conflict::Status => "proxy is not in a state that allows this operation",
            Conflict::StaleTerm => "the writer's leader term is over (fenced write)",
        })
    }
}

/// Why the store could not decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The store is down, unreachable or timed out. The text is for operators' logs only.
    Store(String),
    /// A bounded scan ran out of budget before it could decide.
    ScanBudget,
    /// Stored data could not be decoded or violated an invariant.
    Corrupt(String),
    /// The store is not the one the caller remembers: it lost its memory
    /// (`crate::store_mark`). Nothing was read or changed.
    StoreLost(LossReason),
    /// The store is recovering from a loss and withholds what may have been handed out
    /// before it; what was asked for may be available after `retry_after_ms`.
    StoreRecovering { retry_after_ms: u64 },
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Store(detail) => write!(f, "store unavailable: {detail}"),
            Unavailable::ScanBudget => f.write_str("scan budget exhausted before a decision"),
            Unavailable::Corrupt(detail) => write!(f, "corrupt stored state: {detail}"),
            Unavailable::StoreLost(reason) => write!(f, "store lost: {reason}"),
            Unavailable::StoreRecovering { retry_after_ms } => write!(
                f,
                "store recovering from a loss; retry in {retry_after_ms} ms"
            ),
        }
    }
}

/// The error of every activity-pool port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The request itself is malformed; nothing was changed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The object does not exist (or is not visible to the caller).
    #[error("not found")]
    NotFound,
    /// The request conflicts with the current state; nothing was changed.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// An all-or-nothing extraction could not be satisfied; nothing was changed.
    #[error("insufficient inventory: requested {requested}, matching {matching}")]
    InsufficientInventory { requested: u32, matching: u32 },
    /// The store could not decide; the caller should retry later (503).
    #[error("{0}")]
    Unavailable(Unavailable),
}

impl PoolError {
    pub fn invalid(message: impl Into<String>) -> Self {
        PoolError::InvalidInput(message.into())
    }

    pub fn store_down(detail: impl Into<String>) -> Self {
        PoolError::Unavailable(Unavailable::Store(detail.into()))
    }

    pub fn corrupt(detail: impl Into<String>) -> Self {
        PoolError::Unavailable(Unavailable::Corrupt(detail.into()))
    }

    /// True when a retry later may succeed without changing the request.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, PoolError::Unavailable(_))
    }
}

/// Result alias for the activity-pool ports.
pub type PoolResult<T> = Result<T, PoolError>;
