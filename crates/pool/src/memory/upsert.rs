//! Upserter for MemoryPool: dedupe, incumbent upstream, no re-entry after extraction
//! unless the vendor re-issued a proxy its client gave back (a new generation), `max_size`
//! as the final guard, operation ids for retried batches.

use super::MemoryPool;
use super::state::StoredOperation;
use async_trait::async_trait;
use proxypool_core::extract::renews_given_back;
use proxypool_core::{
    FetchedBatch, PoolResult, ProxyStatus, UnixMillis, UpsertReport, Upserter, prepare_batch,
};

#[async_trait]
impl Upserter for MemoryPool {
    async fn upsert(&self, now: UnixMillis, batch: FetchedBatch) -> PoolResult<UpsertReport> {
        let prepared = prepare_batch(now, &batch)?;
        let mut state = self.lock_for_write(now)?;

        let operation_key = prepared
            .operation_id
            .as_ref()
            .map(|op| (prepared.upstream.clone(), op.clone()));
        if let Some(key) = &operation_key
            && let Some(stored) = state.operations.get(key).filter(|s| now < s.expires_at_ms)
        {
            return Ok(stored.report.clone());
        }

        let mut report = UpsertReport {
            dropped: prepared.dropped,
            ..UpsertReport::default()
        };
        for fresh in prepared.records {
            // An incumbent past its hard expiry is a finished lifetime: clear it first.
            if state
                .records
                .get(&fresh.id)
                .is_some_and(|r| r.hard_expiry_ms <= now)
            {
                state.remove_record(&fresh.id);
            }
            // Given back and re-issued by the vendor: a new generation, stored as a new
            // proxy (FETCHED, checked before anyone gets it, within max_size). The old
            // holder's credentials or issue are no longer the proxy's.
            let renewed = state.given_back.contains(&fresh.id)
                && state
                    .records
                    .get(&fresh.id)
                    .is_some_and(|incumbent| renews_given_back(incumbent, &fresh));
            let full = state.unextracted_of(&fresh.upstream) >= prepared.max_size;
            match state.records.get(&fresh.id) {
                Some(incumbent) if incumbent.upstream != fresh.upstream => {
                    report.foreign_duplicates += 1;
                }
                Some(_) if renewed && full => report.over_max_size += 1,
                Some(_) if renewed => {
                    insert(&mut state, fresh);
                    report.inserted += 1;
                }
                Some(incumbent)
                    if matches!(
                        incumbent.status,
                        ProxyStatus::Extracted | ProxyStatus::Removed
                    ) =>
                {
                    report.extracted_ignored += 1;
                }
                Some(incumbent) => {
                    let mut refreshed = incumbent.clone();
                    refreshed.credentials = fresh.credentials;
                    refreshed.region = fresh.region;
                    refreshed.carrier = fresh.carrier;
                    refreshed.labels = fresh.labels;
                    refreshed.max_sessions = fresh.max_sessions;
                    refreshed.hard_expiry_ms = fresh.hard_expiry_ms;
                    refreshed.usable_until_ms = fresh.usable_until_ms;
                    let id = refreshed.id.clone();
                    let usable_until = refreshed.usable_until_ms;
                    state.replace_record(refreshed);
                    cut_lease(&mut state, &id, usable_until);
                    report.refreshed += 1;
                }
                None if full => report.over_max_size += 1,
                None => {
                    insert(&mut state, fresh);
                    report.inserted += 1;
                }
            }
        }

        if let Some(key) = operation_key {
            state.operations.insert(
                key,
                StoredOperation {
                    report: report.clone(),
                    expires_at_ms: now.saturating_add(self.options.operation_ttl_ms),
                },
            );
        }
        Ok(report)
    }
}

/// Stores `fresh` as a new lifetime (or generation) of its proxy.
fn insert(state: &mut super::state::State, mut fresh: proxypool_core::ProxyRecord) {
    // First stored while the store recovers from a loss: nothing proves the vendor did not
    // hand it out before, unless it says it issued it after.
    fresh.withheld_until_ms = state
        .mark
        .as_ref()
        .and_then(|m| m.recovery)
        .and_then(|r| r.withheld_until(fresh.issued_at_ms, fresh.hard_expiry_ms));
    state.replace_record(fresh);
}

/// A refresh may shorten a proxy's life; a lease never outlives `usable_until`.
fn cut_lease(
    state: &mut super::state::State,
    id: &proxypool_core::ProxyId,
    usable_until: UnixMillis,
) {
    if let Some(assignment) = state.assignments.get(id)
        && assignment.lease_until_ms > usable_until
    {
        let mut cut = assignment.clone();
        cut.lease_until_ms = usable_until;
        state.put_assignment(cut);
    }
}
