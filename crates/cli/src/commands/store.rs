//! `proxypool store status|acknowledge|recover --config FILE`: what the quota's database
//! remembers of the pool store (`proxypool_core::store_mark`), and an operator's say over
//! recoveries. The controllers' store guards carry a change out within a second: an
//! acknowledgement ends the recovery in the store too (the sweep releases what was
//! withheld), a forced recovery is installed as a new, empty store.
//!
//! On PostgreSQL, `acknowledge` and `recover` are the operator's orders: the ledger takes
//! them only from its owner's role (`proxypool_quota::postgres::operator::connect_operator`), so they
//! connect with the URL in the variable `--admin-url-env` names, as `migrate` does, and are
//! refused (exit 2) with the runtime role alone. `status` reads with the runtime role of
//! `[quota]`. SQLite and memory have no roles: the file's permissions are the boundary.

use crate::args::{StoreAction, StoreArgs};
use crate::failure::Failure;
use crate::{quota, settings};
use proxypool_config::{Config, Env, QuotaKind, Role};
use proxypool_core::{LedgerEntry, LossReason, Recovery, StoreLedger, StoreMark};
use proxypool_quota::postgres::operator::{OperatorLedger, connect_operator};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) async fn run(args: StoreArgs) -> Result<(), Failure> {
    let Some(file) = args.config.as_deref() else {
        return Err(Failure::config(
            "--config FILE (or PROXYPOOL_CONFIG) is required",
        ));
    };
    let config = settings::load(file, Role::Controller)?;
    let pool = config.store.key_prefix.clone();
    let hold_ms = proxypool_controller::recovery_hold_ms(&config);
    let entry = match (&config.quota.kind, args.admin_url_env.as_deref()) {
        (QuotaKind::Postgres { .. }, Some(var)) => {
            let ledger = operator_ledger(var).await?;
            let result = act(&ledger, &pool, args.action, hold_ms).await;
            ledger.pool().close().await;
            result?
        }
        (QuotaKind::Postgres { .. }, None) if args.action != StoreAction::Status => {
            return Err(Failure::config(format!(
                "`proxypool store {}` is an operator's order, which the runtime role of \
                 [quota] may not write: pass --admin-url-env VAR, VAR holding the operator's \
                 PostgreSQL URL (the owner's, as for `proxypool migrate --admin-url-env`)",
                action_name(args.action)
            )));
        }
        (_, Some(_)) => {
            return Err(Failure::config(
                "--admin-url-env applies to a PostgreSQL quota only: SQLite has no roles \
                 (who may write its file decides who may change the ledger)",
            ));
        }
        (_, None) => runtime_act(&config, &pool, args.action, hold_ms).await?,
    };
    println!("{}", serde_json::json!({ "pool": pool, "ledger": entry }));
    Ok(())
}

/// The ledger as the quota's configuration opens it (the runtime role on PostgreSQL).
async fn runtime_act(
    config: &Config,
    pool: &str,
    action: StoreAction,
    hold_ms: u64,
) -> Result<Option<LedgerEntry>, Failure> {
    let opened = quota::open(config).await?;
    let result = act(opened.ledger.as_ref(), pool, action, hold_ms).await;
    opened.close().await;
    result
}

/// The ledger as the operator whose URL is in `$var` (its own credentials, as `migrate`
/// takes it), refused when that role is not the ledger's owner.
async fn operator_ledger(var: &str) -> Result<proxypool_quota::PostgresQuota, Failure> {
    let url = Env::from_process()
        .get(var)
        .map(str::to_owned)
        .ok_or_else(|| Failure::config(format!("--admin-url-env: {var} is not set")))?;
    match connect_operator(&url, None).await {
        Ok(OperatorLedger::Operator(ledger)) => Ok(ledger),
        Ok(OperatorLedger::NotOperator { role }) => Err(Failure::config(format!(
            "--admin-url-env {var}: the role {role:?} may not write the operator's orders: it \
             is not the owner of proxypool_quota.store_ledger nor a member of it (the runtime \
             role never is); give the operator's URL, the one `proxypool migrate` runs with"
        ))),
        Err(e) => Err(Failure::runtime(format!("PostgreSQL ({var}): {e}"))),
    }
}

fn action_name(action: StoreAction) -> &'static str {
    match action {
        StoreAction::Status => "status",
        StoreAction::Acknowledge => "acknowledge",
        StoreAction::Recover => "recover",
    }
}

async fn act(
    ledger: &dyn StoreLedger,
    pool: &str,
    action: StoreAction,
    hold_ms: u64,
) -> Result<Option<LedgerEntry>, Failure> {
    let failed = |e: proxypool_core::PoolError| Failure::runtime(format!("store ledger: {e}"));
    let current = ledger.load(pool).await.map_err(failed)?;
    let Some(entry) = current else {
        return match action {
            StoreAction::Status => Ok(None),
            _ => Err(Failure::runtime(format!(
                "no controller has recorded the pool store {pool:?} yet: nothing to change"
            ))),
        };
    };
    let next = match action {
        StoreAction::Status => return Ok(Some(entry)),
        StoreAction::Acknowledge => {
            if entry.recovery.is_none() {
                return Ok(Some(entry));
            }
            LedgerEntry {
                recovery: None,
                ..entry.clone()
            }
        }
        StoreAction::Recover => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let recovery = Recovery {
                lost_at_ms: now,
                hold_ms,
            };
            let mark = StoreMark::fresh(entry.generation.saturating_add(1), Some(recovery))
                .map_err(|e| Failure::runtime(e.to_string()))?;
            LedgerEntry {
                identity: mark.identity,
                generation: mark.generation,
                recovery: mark.recovery,
                loss: Some(LossReason::Forced),
                installed: false,
            }
        }
    };
    if !ledger
        .replace(pool, Some(&entry.identity), &next)
        .await
        .map_err(failed)?
    {
        return Err(Failure::runtime(
            "the pool store's record changed meanwhile (a controller recorded a loss); look again with `proxypool store status`",
        ));
    }
    Ok(Some(next))
}
