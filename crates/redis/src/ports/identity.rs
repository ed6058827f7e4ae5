//! StoreIdentity: the mark (`lib/mark.lua`, `mark_*.lua`), and which incarnation's keyspace
//! every handle of the pool calls (`GroupPool::set_expectation`).

use crate::group::{GroupPool, Side};
use crate::reply::{self, Reply};
use async_trait::async_trait;
use proxypool_core::store_mark::is_identity;
use proxypool_core::{
    Expectation, PoolError, PoolResult, Recovery, StoreIdentity, StoreMark, UnixMillis,
};

#[async_trait]
impl StoreIdentity for GroupPool {
    async fn read_mark(&self) -> PoolResult<Option<StoreMark>> {
        let value = self
            .eval_expecting(&self.scripts.mark_get, 0, Side::Read, Vec::new(), Some(""))
            .await?;
        reply::parse(value, 0)?.optional(decode_mark)
    }

    async fn install_mark(&self, now: UnixMillis, mark: &StoreMark) -> PoolResult<StoreMark> {
        if !is_identity(&mark.identity) {
            return Err(PoolError::invalid("a store identity is 32 hex digits"));
        }
        let (lost_at, hold) = match mark.recovery {
            Some(r) => (r.lost_at_ms.to_string(), r.hold_ms.to_string()),
            None => (String::new(), String::new()),
        };
        let args = vec![
            mark.identity.clone(),
            mark.generation.to_string(),
            lost_at,
            hold,
        ];
        let value = self
            .eval_expecting(&self.scripts.mark_install, now, Side::Read, args, Some(""))
            .await?;
        decode_mark(&reply::parse(value, 0)?)
    }

    async fn advance_generation(&self, now: UnixMillis) -> PoolResult<u64> {
        let reply = self
            .call(&self.scripts.mark_advance, now, Side::Read, Vec::new())
            .await?;
        reply.number(0)
    }

    async fn end_recovery(&self, now: UnixMillis) -> PoolResult<()> {
        self.call(&self.scripts.mark_end_recovery, now, Side::Read, Vec::new())
            .await
            .map(|_| ())
    }

    fn expect(&self, expectation: Option<Expectation>) {
        self.set_expectation(expectation.as_ref());
    }
}

/// "identity\tgeneration\tlost_at\thold" ('' where unset).
fn decode_mark(reply: &Reply) -> PoolResult<StoreMark> {
    let text = reply.text(0)?;
    let f: Vec<&str> = text.split('\t').collect();
    let corrupt = || PoolError::corrupt("store mark");
    let [identity, generation, lost_at, hold] = f[..] else {
        return Err(corrupt());
    };
    if !is_identity(identity) {
        return Err(corrupt());
    }
    let recovery = match (lost_at, hold) {
        ("", "") => None,
        (lost_at, hold) => Some(Recovery {
            lost_at_ms: lost_at.parse().map_err(|_| corrupt())?,
            hold_ms: hold.parse().map_err(|_| corrupt())?,
        }),
    };
    Ok(StoreMark {
        identity: identity.to_owned(),
        generation: generation.parse().map_err(|_| corrupt())?,
        recovery,
    })
}
