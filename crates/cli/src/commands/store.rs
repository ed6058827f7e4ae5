//! `proxypool store status|acknowledge|recover --config FILE`: what the quota's database
//! remembers of the pool store (`proxypool_core::store_mark`), and an operator's say over
//! recoveries. The controllers' store guards carry a change out within a second: an
//! acknowledgement ends the recovery in the store too (the sweep releases what was
//! withheld), a forced recovery is installed as a new, empty store.

use crate::args::{StoreAction, StoreArgs};
use crate::failure::Failure;
use crate::{quota, settings};
use proxypool_config::Role;
use proxypool_core::{LedgerEntry, LossReason, Recovery, StoreLedger, StoreMark};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) async fn run(args: StoreArgs) -> Result<(), Failure> {
    let Some(file) = args.config.as_deref() else {
        return Err(Failure::config(
            "--config FILE (or PROXYPOOL_CONFIG) is required",
        ));
    };
    let config = settings::load(file, Role::Controller)?;
    let opened = quota::open(&config).await?;
    let pool = config.store.key_prefix.clone();
    let hold_ms = proxypool_controller::recovery_hold_ms(&config);
    let result = act(opened.ledger.as_ref(), &pool, args.action, hold_ms).await;
    opened.close().await;
    let entry = result?;
    println!("{}", serde_json::json!({ "pool": pool, "ledger": entry }));
    Ok(())
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
