//! The [`QuotaPort`] of every SQL backend, written once over [`SqlBackend`]: the input
//! checked first, then the decision (with its retry) or the settlement, each within the
//! backend's time bound, and a read-only probe for readiness.

use async_trait::async_trait;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::attempt;
use crate::command::QuotaCommand;
use crate::config::{OperationLimits, QuotaPolicy};
use crate::decision::QuotaDecision;
use crate::error::InvalidCommand;
use crate::port::QuotaPort;
use crate::settle::{Charge, SettleOutcome, Settlement};
use crate::sql_backend::SqlBackend;
use crate::sql_decision::SqlFlow;
use crate::unavailable::UnavailableReason;

#[async_trait]
impl<B> QuotaPort for B
where
    B: SqlBackend,
    <B::Db as Database>::Arguments: IntoArguments<B::Db>,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'a> &'a str: Encode<'a, B::Db> + Type<B::Db>,
    for<'a> i64: Encode<'a, B::Db> + Decode<'a, B::Db> + Type<B::Db>,
    usize: ColumnIndex<<B::Db as Database>::Row>,
{
    async fn consume(
        &self,
        command: &QuotaCommand,
        limits: OperationLimits,
    ) -> Result<QuotaDecision, InvalidCommand> {
        let policy = QuotaPolicy::checked(command, limits)?;
        let statements = &B::STATEMENTS;
        let decide = attempt::decide(|| SqlFlow::attempt(self.pool(), statements, command, policy));
        Ok(tokio::time::timeout(self.decision_timeout(), decide)
            .await
            .unwrap_or(QuotaDecision::unavailable(UnavailableReason::Timeout)))
    }

    async fn settle(
        &self,
        charge: &Charge,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, InvalidCommand> {
        charge.validate(settlement)?;
        let settle = SqlFlow::settle(self.pool(), &B::STATEMENTS, charge, settlement);
        // Past the bound the charge is as it was or settled, never half.
        Ok(tokio::time::timeout(self.decision_timeout(), settle)
            .await
            .unwrap_or(SettleOutcome::Unavailable {
                reason: UnavailableReason::Timeout,
            }))
    }

    async fn ready(&self) -> bool {
        let probe = sqlx::query::<B::Db>("SELECT 1").execute(self.pool());
        matches!(
            tokio::time::timeout(self.decision_timeout(), probe).await,
            Ok(Ok(_))
        )
    }
}
