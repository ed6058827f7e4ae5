//! [`QuotaPort`]: the one narrow trait callers depend on.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::command::QuotaCommand;
use crate::config::OperationLimits;
use crate::decision::QuotaDecision;
use crate::error::InvalidCommand;

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

    async fn ready(&self) -> bool {
        (**self).ready().await
    }
}
