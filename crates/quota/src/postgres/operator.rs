//! The operator's connection to the store ledger, for `proxypool store acknowledge` and
//! `proxypool store recover`.
//!
//! Those orders end a recovery early or start one, so they are the operator's alone: the
//! ledger table's trigger (migration `0004_store_ledger_operator.sql`) lets only its
//! owner's role, or a member of it, write them; the runtime role the replicas connect as
//! is held to what a controller does. [`connect_operator`] connects with the operator's
//! URL and asks the database first whether the role is the owner's, so a runtime
//! credential given in its place is named as such before anything is written.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::PostgresQuota;
use crate::error::SetupError;

/// How long the operator's calls (connecting, each statement) may take.
const OPERATOR_TIMEOUT: Duration = Duration::from_secs(10);

/// What the database says of the role an operator's URL names.
#[derive(Debug)]
pub enum OperatorLedger {
    /// The ledger's owner (or a member of it): its writes are orders.
    Operator(PostgresQuota),
    /// Any other role, such as the runtime one: the ledger refuses its orders.
    NotOperator {
        /// The role the URL connected as.
        role: String,
    },
}

/// Connects to `url` (the password inside it, or `password` beside it) with one
/// connection and asks whether its role may write the operator's orders to the ledger.
/// Run [`super::migrate`] first: a database without the ledger is an error.
pub async fn connect_operator(
    url: &str,
    password: Option<&str>,
) -> Result<OperatorLedger, SetupError> {
    let options: PgConnectOptions = url
        .parse()
        .map_err(|_| SetupError::InvalidSetting("unparsable PostgreSQL URL".to_owned()))?;
    let options = match password {
        Some(password) => options.password(password),
        None => options,
    };
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(OPERATOR_TIMEOUT)
        .connect_with(options.application_name("proxypool-store-operator"))
        .await?;
    let checked = tokio::time::timeout(
        OPERATOR_TIMEOUT,
        sqlx::query_as::<_, (String, bool)>(
            "SELECT current_user::text, pg_has_role(current_user, class.relowner, 'USAGE') \
             FROM pg_class AS class \
             WHERE class.oid = 'proxypool_quota.store_ledger'::regclass",
        )
        .fetch_one(&pool),
    )
    .await;
    let (role, is_operator) = match checked {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            pool.close().await;
            return Err(error.into());
        }
        Err(_) => {
            pool.close().await;
            return Err(SetupError::Timeout(OPERATOR_TIMEOUT));
        }
    };
    if !is_operator {
        pool.close().await;
        return Ok(OperatorLedger::NotOperator { role });
    }
    Ok(OperatorLedger::Operator(PostgresQuota::from_pool(
        pool,
        OPERATOR_TIMEOUT,
    )))
}
