//! [`QuotaPort`]: the one narrow trait callers depend on.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::command::QuotaCommand;
use crate::config::QuotaConfig;
use crate::decision::QuotaDecision;
use crate::error::InvalidCommand;

/// Consumes quota for one command. Call it after authentication and authorization and
/// before any mutation; a denial must leave the request without side effects.
#[async_trait]
pub trait QuotaPort: Send + Sync + Debug {
    /// Decides `command`.
    ///
    /// `Err` only for a command that fails [`QuotaCommand::validate`]; nothing is written
    /// then. Every store problem is `Ok(QuotaDecision::Unavailable { .. })`, returned within
    /// the backend's time bound.
    async fn consume(&self, command: &QuotaCommand) -> Result<QuotaDecision, InvalidCommand>;

    /// The windows and limits this quota decides with.
    fn config(&self) -> &QuotaConfig;
}

#[async_trait]
impl<T: QuotaPort + ?Sized> QuotaPort for Arc<T> {
    async fn consume(&self, command: &QuotaCommand) -> Result<QuotaDecision, InvalidCommand> {
        (**self).consume(command).await
    }

    fn config(&self) -> &QuotaConfig {
        (**self).config()
    }
}
