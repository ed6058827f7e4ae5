//! [`QuotaPort`]: the one narrow trait callers depend on.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::command::QuotaCommand;
use crate::config::OperationLimits;
use crate::decision::QuotaDecision;
use crate::error::InvalidCommand;
use crate::settle::{Charge, SettleOutcome, Settlement};

/// Consumes quota for one command. Call it after authentication and authorization and
/// before any mutation; a denial must leave the request without side effects.
///
/// A backend holds no limits of its own: each call brings the window and limit of the
/// caller (one client's limits for `command.operation`), so one instance serves clients
/// with different limits, and a changed limit takes effect on the next call.
#[async_trait]
pub trait QuotaPort: Send + Sync + Debug {
    /// Decides `command` under `limits`; the decision reports them as its policy.
    ///
    /// Within a window a bucket is judged by the limit of the call at hand: with the count
    /// already at or above a lowered limit a new receipt is exceeded, while a receipt
    /// already in the window is still a replay (admitted, not charged, remaining 0).
    ///
    /// `Err` only for a command that fails [`QuotaCommand::validate`]; nothing is written
    /// then. Every store problem is `Ok(QuotaDecision::Unavailable { .. })`, returned within
    /// the backend's time bound.
    async fn consume(
        &self,
        command: &QuotaCommand,
        limits: OperationLimits,
    ) -> Result<QuotaDecision, InvalidCommand>;

    /// Settles a charge a decision made ([`crate::QuotaDecision::charge`]) once the request
    /// has run: [`Settlement::Refund`] undoes it, [`Settlement::Spend`] keeps it under
    /// another receipt and frees the original (see `settle.rs`). Atomic: either the bucket
    /// changes as described or not at all. Applies only while the charge's window is the
    /// store's current window and the receipt is still in it; otherwise
    /// [`SettleOutcome::NotFound`], and nothing changes.
    ///
    /// `Err` only for invalid input (nothing is written); every store problem is
    /// `Ok(SettleOutcome::Unavailable { .. })` within the backend's time bound.
    async fn settle(
        &self,
        charge: &Charge,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, InvalidCommand>;

    /// Whether the store answers, by a read that changes nothing (readiness probes must
    /// not write), within the backend's time bound.
    async fn ready(&self) -> bool;
}

#[async_trait]
impl<T: QuotaPort + ?Sized> QuotaPort for Arc<T> {
    async fn consume(
        &self,
        command: &QuotaCommand,
        limits: OperationLimits,
    ) -> Result<QuotaDecision, InvalidCommand> {
        (**self).consume(command, limits).await
    }

    async fn settle(
        &self,
        charge: &Charge,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, InvalidCommand> {
        (**self).settle(charge, settlement).await
    }

    async fn ready(&self) -> bool {
        (**self).ready().await
    }
}
