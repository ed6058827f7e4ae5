//! Named leader leases with fencing tokens.
//!
//! Several controllers may share one store. The reconciler, checker and ownership loops run
//! only on the controller holding the `controller` lease, so vendor fetches and checks are
//! not multiplied. Correctness never depends on the lease (every pool operation is atomic
//! on its own); it saves work. A standby takes over once the holder stops renewing.
//!
//! The leader's own writes are fenced as well: a [`Fence`] names the lease and the token
//! of the term the writer believes it holds, and a store handle made with
//! [`crate::Fencing::fenced`] refuses every call, atomically with the call itself, unless
//! that lease is live with that token (`Conflict::StaleTerm`). A leader paused past its
//! lease (a stopped process, a long GC-like stall) cannot write once a standby took over.

use crate::error::{PoolError, PoolResult};
use crate::time::UnixMillis;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub name: String,
    pub holder: String,
    /// Increases every time the lease changes hands (never on renewal), so a stale holder
    /// can be told apart from the current one.
    pub token: u64,
    pub acquired_at_ms: UnixMillis,
    pub expires_at_ms: UnixMillis,
}

/// The term a leader's write is made in: the lease's name, its holder and the token it
/// held. The holder is compared as well as the token, so a term survives no coincidence of
/// tokens (and tokens themselves never repeat: see [`next_token`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fence {
    pub lease: String,
    pub holder: String,
    pub token: u64,
}

impl Fence {
    pub fn new(lease: impl Into<String>, holder: impl Into<String>, token: u64) -> Self {
        Fence {
            lease: lease.into(),
            holder: holder.into(),
            token,
        }
    }

    /// Whether `lease` (the live lease of this name at `now`, if any) is this term.
    pub fn admits(&self, lease: Option<&Lease>, now: UnixMillis) -> bool {
        lease.is_some_and(|l| {
            l.name == self.lease
                && l.holder == self.holder
                && l.token == self.token
                && now < l.expires_at_ms
        })
    }
}

/// The token of a lease's next term: above the last one the store remembers and not below
/// the time it is taken at, so a store that lost its memory (and with it the last token)
/// still never issues a token a term before the loss held, unless clocks ran backwards by
/// more than the time between the two terms.
pub fn next_token(last: u64, now: UnixMillis) -> u64 {
    last.saturating_add(1).max(now)
}

/// Stores leases (implemented by every activity-pool adapter).
#[async_trait]
pub trait LeaseStore: Send + Sync + Debug {
    /// Takes the lease when it is free or lapsed, or renews it when `holder` already holds
    /// it. Returns the lease when `holder` holds it afterwards, `None` when someone else does.
    async fn try_acquire(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> PoolResult<Option<Lease>>;

    /// Gives the lease up early (clean shutdown); a no-op unless `holder` holds it with
    /// `token`.
    async fn release(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        token: u64,
    ) -> PoolResult<()>;

    /// The live lease, if any.
    async fn current(&self, now: UnixMillis, name: &str) -> PoolResult<Option<Lease>>;
}

/// Lease names and holders are short printable identifiers; the TTL is positive.
pub fn validate_lease_request(name: &str, holder: &str, ttl_ms: u64) -> PoolResult<()> {
    let printable =
        |s: &str| !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_graphic());
    if !printable(name) || !printable(holder) {
        return Err(PoolError::invalid(
            "lease name and holder must be 1-128 printable ASCII characters",
        ));
    }
    if ttl_ms == 0 {
        return Err(PoolError::invalid("lease ttl_ms must be at least 1"));
    }
    Ok(())
}
