//! Upserter: `prepare_batch` in Rust, then `upsert.lua` per chunk. With an operation id,
//! every chunk stores its result and the last one stores the whole report, so a retried
//! batch returns the first report and never applies a finished chunk twice.

use crate::codec::upsert::{Counts, decode_batch, dropped_json};
use crate::codec::{clamp_ms, record};
use crate::group::{GroupPool, Side};
use crate::keys;
use async_trait::async_trait;
use proxypool_core::{
    FetchedBatch, PoolError, PoolResult, PreparedBatch, UnixMillis, UpsertReport, Upserter,
    prepare_batch,
};

#[async_trait]
impl Upserter for GroupPool {
    async fn upsert(&self, now: UnixMillis, batch: FetchedBatch) -> PoolResult<UpsertReport> {
        let prepared = prepare_batch(now, &batch)?;
        self.upsert_prepared(now, prepared).await
    }
}

impl GroupPool {
    /// Stores a batch `prepare_batch` made (a pool over several groups hands each group its
    /// share, with the room under max_size that share may take).
    pub(crate) async fn upsert_prepared(
        &self,
        now: UnixMillis,
        prepared: PreparedBatch,
    ) -> PoolResult<UpsertReport> {
        let chunks: Vec<_> = prepared.records.chunks(self.options.upsert_chunk).collect();
        // An empty batch still runs once: it may replay a stored report or store one.
        let rounds = chunks.len().max(1);
        let operation = prepared.operation_id.as_deref();
        let batch_key = operation.map(|op| keys::operation(&prepared.upstream, op, None));
        let expires_at = clamp_ms(now.saturating_add(self.options.operation_ttl_ms));
        let dropped = dropped_json(&prepared.dropped);

        let mut totals = Counts::default();
        for round in 0..rounds {
            let chunk_key = operation
                .filter(|_| rounds > 1)
                .map(|op| keys::operation(&prepared.upstream, op, Some(round)));
            let records = chunks.get(round).copied().unwrap_or_default();
            let mut args = Vec::with_capacity(records.len() + 8);
            args.push(batch_key.clone().unwrap_or_default());
            args.push(chunk_key.unwrap_or_default());
            args.push(if round + 1 == rounds { "1" } else { "0" }.to_owned());
            args.push(expires_at.to_string());
            args.push(prepared.max_size.to_string());
            args.push(prepared.upstream.to_string());
            args.push(totals.encode());
            args.push(dropped.clone());
            args.extend(records.iter().map(record::encode));

            let reply = self
                .call(&self.scripts.upsert, now, Side::Write, args)
                .await?;
            match reply.status.as_str() {
                "batch" => return decode_batch(&reply.text(0)?),
                "chunk" | "ok" => totals.add(Counts::decode(&reply.text(0)?)?),
                other => {
                    return Err(PoolError::corrupt(format!(
                        "unexpected upsert reply {other}"
                    )));
                }
            }
        }
        Ok(totals.report(prepared.dropped))
    }
}
