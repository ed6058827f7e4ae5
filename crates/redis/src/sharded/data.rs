//! The pool's data ports over groups: upserts and health results split by the group of
//! each proxy, reads merged in the order one group answers in, counts summed, and what is
//! the cluster's (worker modes, provider statuses, usage, session feedback, the ticket
//! key) kept in the home group.

use super::RedisPool;
use async_trait::async_trait;
use futures_util::future::try_join_all;
use proxypool_core::usage::ClientUsage;
use proxypool_core::{
    AdminStore, ClientId, CooldownChange, CooldownReport, CooldownStore, DomainCooldown, DueQuery,
    FetchedBatch, Footprint, HealthBatch, HealthReport, HealthStore, InventoryReader,
    InventoryView, KeyedCall, KeyedModeSet, Maintenance, PoolError, PoolResult, ProviderStatus,
    ProxyId, ProxyListFilter, ProxyLister, ProxyPage, ProxyRecord, ProxyStatus, ReturnOutcome,
    SessionFeedback, SweepReport, TicketKey, TicketKeyStore, Unavailable, UnixMillis, UpsertReport,
    Upserter, UpstreamId, UsageReader, WorkerId, WorkerMode, WorkerModeRecord, prepare_batch,
};
use std::collections::HashSet;

#[async_trait]
impl Upserter for RedisPool {
    async fn upsert(&self, now: UnixMillis, batch: FetchedBatch) -> PoolResult<UpsertReport> {
        if let Some(one) = self.single() {
            return one.upsert(now, batch).await;
        }
        let prepared = prepare_batch(now, &batch)?;
        let parts = self.split(prepared.records.iter().cloned(), |r| &r.id);
        // max_size counts the upstream over every group: the room left goes to the batch's
        // new proxies in batch order, each group getting what its own share of them needs.
        let upstream = &prepared.upstream;
        let known = try_join_all(self.groups().iter().zip(&parts).map(|(g, part)| {
            let records: Vec<&ProxyRecord> = part.iter().collect();
            async move { g.known(now, upstream, &records).await }
        }))
        .await?;
        let held: u64 = known.iter().map(|(count, _)| count).sum();
        let mut room = prepared.max_size.saturating_sub(held);
        let mut fresh = HashSet::new();
        // Fresh: what the group will store anew (no live record, or a new generation of a
        // proxy given back), so it needs room.
        for (part, (_, kept)) in parts.iter().zip(&known) {
            for (record, kept) in part.iter().zip(kept) {
                if !kept {
                    fresh.insert(record.id.clone());
                }
            }
        }
        let mut allowed = vec![0u64; parts.len()];
        for record in &prepared.records {
            if room == 0 {
                break;
            }
            // Taken out as it is counted: a proxy listed twice needs room once.
            if fresh.remove(&record.id) {
                allowed[self.group_index(&record.id)] += 1;
                room -= 1;
            }
        }
        let reports = try_join_all(self.groups().iter().zip(parts).enumerate().map(
            |(i, (g, records))| {
                let mut part = prepared.clone();
                part.records = records;
                part.max_size = known[i].0 + allowed[i];
                if i > 0 {
                    part.dropped.clear();
                }
                async move { g.upsert_prepared(now, part).await }
            },
        ))
        .await?;
        let mut total = UpsertReport::default();
        for report in reports {
            total.inserted += report.inserted;
            total.refreshed += report.refreshed;
            total.foreign_duplicates += report.foreign_duplicates;
            total.extracted_ignored += report.extracted_ignored;
            total.over_max_size += report.over_max_size;
            for (reason, count) in report.dropped {
                *total.dropped.entry(reason).or_default() += count;
            }
        }
        Ok(total)
    }
}

/// Where a record stands in the checker's queue: FETCHED oldest first, then SUSPECT, then
/// the re-checks, ties by id (`due.lua`'s score).
fn due_order(r: &ProxyRecord) -> (u8, UnixMillis, &ProxyId) {
    let checked = r.health.checked_at_ms.unwrap_or(0);
    match r.status {
        ProxyStatus::Fetched => (0, r.fetched_at_ms, &r.id),
        ProxyStatus::Suspect => (1, checked, &r.id),
        _ => (2, checked, &r.id),
    }
}

#[async_trait]
impl HealthStore for RedisPool {
    async fn apply_health(&self, now: UnixMillis, batch: HealthBatch) -> PoolResult<HealthReport> {
        if let Some(one) = self.single() {
            return one.apply_health(now, batch).await;
        }
        batch.validate()?;
        let parts = self.split(batch.observations.iter().cloned(), |o| &o.proxy_id);
        let reports = try_join_all(
            self.groups()
                .iter()
                .zip(parts)
                .filter(|(_, p)| !p.is_empty())
                .map(|(g, observations)| {
                    let part = HealthBatch {
                        observations,
                        ..batch.clone()
                    };
                    g.apply_health(now, part)
                }),
        )
        .await?;
        let mut total = HealthReport::default();
        for report in reports {
            total.applied += report.applied;
            total.ignored += report.ignored;
        }
        Ok(total)
    }

    async fn due_for_check(
        &self,
        now: UnixMillis,
        query: DueQuery,
    ) -> PoolResult<Vec<ProxyRecord>> {
        self.gathered(
            query.limit,
            |g| g.due_for_check(now, query),
            |a, b| due_order(a).cmp(&due_order(b)),
        )
        .await
    }
}

#[async_trait]
impl InventoryReader for RedisPool {
    async fn inventory(&self, now: UnixMillis, upstream: &UpstreamId) -> PoolResult<InventoryView> {
        if let Some(one) = self.single() {
            return one.inventory(now, upstream).await;
        }
        let parts = try_join_all(self.groups().iter().map(|g| g.inventory(now, upstream))).await?;
        let mut parts = parts.into_iter();
        let mut total = parts.next().expect("a home group");
        for part in parts {
            total.managed += part.managed;
            total.available_slots += part.available_slots;
            total.unextracted += part.unextracted;
            for (status, count) in part.by_status {
                *total.by_status.entry(status).or_default() += count;
            }
        }
        // The scan budget bounds the whole read, as it bounds one group's.
        if total.managed > self.options().inventory_scan_budget as u64 {
            return Err(PoolError::Unavailable(Unavailable::ScanBudget));
        }
        Ok(total)
    }
}

#[async_trait]
impl Maintenance for RedisPool {
    async fn sweep(&self, now: UnixMillis, limit: usize) -> PoolResult<SweepReport> {
        if let Some(one) = self.single() {
            return one.sweep(now, limit).await;
        }
        // One group after another while the limit lasts; sessions are counted once (every
        // group keeps a copy), as the home group's.
        let mut total = SweepReport::default();
        for (i, group) in self.groups().iter().enumerate() {
            let left = limit.saturating_sub(total.records_removed as usize);
            if left == 0 {
                total.more_pending = true;
                break;
            }
            let report = group.sweep(now, left).await?;
            total.records_removed += report.records_removed;
            total.assignments_removed += report.assignments_removed;
            if i == 0 {
                total.sessions_removed = report.sessions_removed;
            }
            total.results_removed += report.results_removed;
            total.records_released += report.records_released;
            total.more_pending |= report.more_pending;
        }
        Ok(total)
    }

    async fn footprint(&self) -> PoolResult<Footprint> {
        let parts = try_join_all(self.groups().iter().map(|g| g.footprint())).await?;
        let mut total = Footprint::default();
        for (i, part) in parts.into_iter().enumerate() {
            total.records += part.records;
            total.assignments += part.assignments;
            if i == 0 {
                // Every group keeps a copy of each session and runtime: counted once.
                total.sessions = part.sessions;
                total.runtimes = part.runtimes;
            }
            total.results += part.results;
            total.index_entries += part.index_entries;
        }
        Ok(total)
    }
}

#[async_trait]
impl ProxyLister for RedisPool {
    async fn list_proxies(
        &self,
        now: UnixMillis,
        filter: &ProxyListFilter,
        limit: usize,
    ) -> PoolResult<ProxyPage> {
        if let Some(one) = self.single() {
            return one.list_proxies(now, filter, limit).await;
        }
        // The scan budget bounds the whole pool a listing walks, as it bounds one group.
        if self.footprint().await?.records > self.options().inventory_scan_budget as u64 {
            return Err(PoolError::Unavailable(Unavailable::ScanBudget));
        }
        let parts = try_join_all(
            self.groups()
                .iter()
                .map(|g| g.list_proxies(now, filter, limit)),
        )
        .await?;
        let more = parts.iter().any(|p| p.next.is_some());
        let mut proxies: Vec<_> = parts.into_iter().flat_map(|p| p.proxies).collect();
        proxies.sort_by(|a, b| a.id.cmp(&b.id));
        let cut = proxies.len() > limit;
        proxies.truncate(limit);
        let next = if cut || more {
            proxies.last().map(|p| p.id.clone())
        } else {
            None
        };
        Ok(ProxyPage { proxies, next })
    }
}

#[async_trait]
impl UsageReader for RedisPool {
    async fn usage(&self, now: UnixMillis, clients: &[ClientId]) -> PoolResult<Vec<ClientUsage>> {
        self.home().usage(now, clients).await
    }
}

#[async_trait]
impl TicketKeyStore for RedisPool {
    async fn ticket_key(&self, now: UnixMillis) -> PoolResult<TicketKey> {
        self.home().ticket_key(now).await
    }
}

#[async_trait]
impl AdminStore for RedisPool {
    async fn set_worker_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
    ) -> PoolResult<WorkerModeRecord> {
        self.home().set_worker_mode(now, worker, mode).await
    }

    async fn set_worker_mode_keyed(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
        call: &KeyedCall,
    ) -> PoolResult<KeyedModeSet> {
        self.home()
            .set_worker_mode_keyed(now, worker, mode, call)
            .await
    }

    async fn worker_modes(&self) -> PoolResult<Vec<WorkerModeRecord>> {
        self.home().worker_modes().await
    }

    async fn put_provider_status(
        &self,
        now: UnixMillis,
        status: &ProviderStatus,
    ) -> PoolResult<()> {
        self.home().put_provider_status(now, status).await
    }

    async fn provider_statuses(&self) -> PoolResult<Vec<ProviderStatus>> {
        self.home().provider_statuses().await
    }
}

#[async_trait]
impl CooldownStore for RedisPool {
    async fn apply_cooldowns(
        &self,
        now: UnixMillis,
        changes: &[CooldownChange],
    ) -> PoolResult<CooldownReport> {
        if let Some(one) = self.single() {
            return one.apply_cooldowns(now, changes).await;
        }
        proxypool_core::cooldown::validate_changes(changes)?;
        let parts = self.split(changes.iter().cloned(), |c| c.proxy_id());
        let reports = try_join_all(
            self.groups()
                .iter()
                .zip(&parts)
                .filter(|(_, p)| !p.is_empty())
                .map(|(g, part)| g.apply_cooldowns(now, part)),
        )
        .await?;
        let mut total = CooldownReport::default();
        for report in reports {
            total.applied += report.applied;
            total.unknown += report.unknown;
        }
        Ok(total)
    }

    async fn cooldowns_of(
        &self,
        now: UnixMillis,
        proxies: &[ProxyId],
    ) -> PoolResult<Vec<DomainCooldown>> {
        if let Some(one) = self.single() {
            return one.cooldowns_of(now, proxies).await;
        }
        let parts = self.split(proxies.iter().cloned(), |id| id);
        let answers = try_join_all(
            self.groups()
                .iter()
                .zip(&parts)
                .map(|(g, part)| g.cooldowns_of(now, part)),
        )
        .await?;
        // By proxy in the given order, as one group answers.
        let mut by_proxy: std::collections::HashMap<ProxyId, Vec<DomainCooldown>> =
            std::collections::HashMap::new();
        for entry in answers.into_iter().flatten() {
            by_proxy
                .entry(entry.proxy_id.clone())
                .or_default()
                .push(entry);
        }
        let mut ordered = Vec::new();
        for id in proxies {
            if let Some(entries) = by_proxy.remove(id) {
                ordered.extend(entries);
            }
        }
        Ok(ordered)
    }

    async fn add_session_feedback(
        &self,
        now: UnixMillis,
        feedback: SessionFeedback,
    ) -> PoolResult<()> {
        self.home().add_session_feedback(now, feedback).await
    }

    async fn session_feedback(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> PoolResult<Vec<SessionFeedback>> {
        self.home().session_feedback(now, limit).await
    }

    async fn may_report(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<proxypool_core::ticket::Reporter> {
        self.group_of(proxy).may_report(now, client, proxy).await
    }

    async fn return_extracted(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<ReturnOutcome> {
        self.group_of(proxy)
            .return_extracted(now, client, proxy)
            .await
    }
}
