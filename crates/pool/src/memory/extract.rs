//! Extractor for MemoryPool: exclusive, filtered, bounded, idempotent.

use super::MemoryPool;
use super::state::{ExpiryOrdered, FilterKey, State, StoredExtraction};
use async_trait::async_trait;
use proxypool_core::{
    ClientId, Conflict, ExtractMode, ExtractOutcome, ExtractRequest, ExtractResponse,
    ExtractedProxy, ExtractionId, Extractor, PoolError, PoolResult, ProxyFilter, ProxyId,
    ProxyStatus, Unavailable, UnixMillis,
};

/// The smallest index that covers the filter: every match is in it.
fn driving_index<'a>(state: &'a State, filter: &ProxyFilter) -> Option<&'a ExpiryOrdered> {
    let mut keys = Vec::new();
    if let Some(protocol) = filter.protocol {
        keys.push(FilterKey::Protocol(protocol));
    }
    if let Some(region) = &filter.region {
        keys.push(FilterKey::Region(region.clone()));
    }
    if let Some(carrier) = &filter.carrier {
        keys.push(FilterKey::Carrier(carrier.clone()));
    }
    if let Some(upstream) = &filter.upstream {
        keys.push(FilterKey::Upstream(upstream.clone()));
    }
    if keys.is_empty() {
        return Some(&state.available.all);
    }
    // A filter value with no index at all matches nothing.
    let mut smallest: Option<&ExpiryOrdered> = None;
    for key in &keys {
        let set = state.available.by_filter.get(key)?;
        if smallest.is_none_or(|s| set.len() < s.len()) {
            smallest = Some(set);
        }
    }
    smallest
}

/// What a bounded scan found.
enum Scan {
    /// Decided: the chosen ids and how many matched in total (including the reserve).
    Decided { chosen: Vec<ProxyId>, matching: u32 },
    /// Ran out of budget before it could decide.
    OverBudget,
}

fn scan(state: &State, now: UnixMillis, request: &ExtractRequest, budget: usize) -> Scan {
    let Some(index) = driving_index(state, &request.filter) else {
        return Scan::Decided {
            chosen: Vec::new(),
            matching: 0,
        };
    };
    let wanted = request.count as usize;
    let reserve = request.reserve_for_gateway as usize;
    let mut chosen = Vec::with_capacity(wanted);
    let mut matching = 0usize;
    // Longest-lived first: clients get the most usable time per proxy.
    for (examined, (usable_until, id)) in index.iter().rev().enumerate() {
        if *usable_until <= now {
            break; // everything further is past usable_until
        }
        if examined == budget {
            return Scan::OverBudget;
        }
        let Some(record) = state.live_record(id, now) else {
            continue;
        };
        if state.assignments.contains_key(id) || !request.accepts(now, record) {
            continue;
        }
        if let Some(domain) = &request.for_domain
            && state.is_cooling_for(id, domain, request.project.as_ref(), now)
        {
            continue;
        }
        matching += 1;
        if matching <= reserve {
            continue; // kept back for the gateway
        }
        chosen.push(id.clone());
        if chosen.len() == wanted {
            break;
        }
    }
    Scan::Decided {
        chosen,
        matching: matching as u32,
    }
}

#[async_trait]
impl Extractor for MemoryPool {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        request.validate()?;
        let id = request.extraction_id();
        let digest = request.digest();
        let mut state = self.lock_for_write(now)?;

        if let Some(stored) = state.extractions.get(&id).filter(|s| now < s.held_until_ms) {
            if stored.client != request.client || stored.digest != digest {
                return Err(PoolError::Conflict(Conflict::IdempotencyDigest));
            }
            if now >= stored.expires_at_ms {
                return Err(PoolError::Conflict(Conflict::IdempotencyExpired));
            }
            // A replay is a copy of what was handed out, never a new grant: a proxy given
            // back since shows no credentials.
            let response = stored.response.clone();
            return Ok(ExtractOutcome {
                response: response.without_given_back(|p| state.holds(&request.client, p, now)),
                replayed: true,
            });
        }

        let (chosen, matching) = match scan(&state, now, &request, self.options.extract_scan_budget)
        {
            Scan::OverBudget => return Err(PoolError::Unavailable(Unavailable::ScanBudget)),
            Scan::Decided { chosen, matching } => (chosen, matching),
        };
        let short = match request.mode {
            ExtractMode::AllOrNothing => chosen.len() < request.count as usize,
            ExtractMode::Partial => chosen.is_empty(),
        };
        if short && let Some(retry_after_ms) = state.recovery_retry_after(now) {
            return Err(PoolError::Unavailable(Unavailable::StoreRecovering {
                retry_after_ms,
            }));
        }
        if request.mode == ExtractMode::AllOrNothing && chosen.len() < request.count as usize {
            return Err(PoolError::InsufficientInventory {
                requested: request.count,
                matching: matching.saturating_sub(request.reserve_for_gateway),
            });
        }

        let mut proxies = Vec::with_capacity(chosen.len());
        for proxy_id in &chosen {
            let Some(current) = state.records.get(proxy_id) else {
                continue;
            };
            let mut record = current.clone();
            record.status = ProxyStatus::Extracted;
            proxies.push(ExtractedProxy::from(&record));
            state
                .usage
                .record_extracted(now, &request.client, &record.upstream, 1);
            state
                .extracted_by
                .insert(record.id.clone(), request.client.clone());
            state.replace_record(record);
        }
        let response = ExtractResponse {
            id: id.clone(),
            client: request.client.clone(),
            requested: request.count,
            returned: proxies.len() as u32,
            proxies,
            created_at_ms: now,
        };
        let expires_at_ms =
            now.saturating_add(response.replay_ttl_ms(now, request.idempotency_ttl_ms));
        let held_until_ms = request.held_until(now, expires_at_ms);
        // A stale entry (a held key that lapsed) is replaced: drop its expiry entry too.
        if let Some(previous) = state.extractions.get(&id) {
            let entry = (previous.held_until_ms, id.clone());
            state.extraction_expiry.remove(&entry);
        }
        state.extraction_expiry.insert((held_until_ms, id.clone()));
        state.extractions.insert(
            id,
            StoredExtraction {
                client: request.client,
                digest,
                response: response.clone(),
                expires_at_ms,
                held_until_ms,
            },
        );
        Ok(ExtractOutcome {
            response,
            replayed: false,
        })
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse> {
        let state = self.lock()?;
        state
            .extractions
            .get(id)
            .filter(|s| now < s.expires_at_ms && &s.client == client)
            .map(|s| {
                let response = s.response.clone();
                response.without_given_back(|p| state.holds(client, p, now))
            })
            .ok_or(PoolError::NotFound)
    }
}
