//! Extraction over groups. Each extraction is anchored in the group its id hashes to: that
//! group keeps its stored response (every replay and `get_extraction` read it there) and,
//! while parts are taken, its claim.
//!
//! 1. The anchor call (`extract.lua` as 'anchor'): the stored response (replay or
//!    conflict); else an earlier attempt's claim, which this one resumes; else an
//!    extraction in the anchor group. When that finds everything it is the whole answer,
//!    stored and counted as with one group: one call, in a group that differs from one
//!    extraction to the next, so spread requests spread over the primaries. Otherwise it
//!    leaves its part under a new claim.
//! 2. The other groups in turn (from the anchor on) each take at most what is still
//!    missing as their part, stored under the claim's token: an attempt that resumes the
//!    claim replays each part instead of taking it again. The reserve
//!    (`reserve_for_gateway`) and the scan budget are the whole extraction's: each group
//!    leaves behind what is left of the reserve and examines at most what is left of the
//!    budget.
//! 3. `xend.lua` (anchor): completes the claim with the merged response, or, when the
//!    whole falls short (all-or-nothing short of `count`) or a group failed, aborts it;
//!    every group then gives its part back (`xundo.lua`), so an all-or-nothing extraction
//!    that fails holds nothing. Whoever ends a claim first decides for every attempt
//!    sharing it; an attempt that lost gives back what it took under it.
//!
//! Between steps 2 and 3 an all-or-nothing extraction that will fail holds its parts for a
//! moment, so a concurrent extraction may find less than it would have: the cost of taking
//! across groups without a lock over them. A part in a group that cannot be reached when
//! the parts are given back stays taken until its proxies' lifetime ends (nobody is
//! handed them meanwhile). No proxy is ever handed out twice.
//!
//! A replay and `get_extraction` read the stored response, then ask each proxy's group
//! which of its proxies the client still holds (`holding.lua`): one it gave back since is
//! shown returned, without credentials (`ExtractResponse::without_given_back`). Asked
//! after the read, so a return that finished before the call is always seen.

use super::RedisPool;
use super::calls::{ClaimEnd, ClaimKeys};
use crate::codec::extraction;
use crate::group::GroupPool;
use crate::keys;
use crate::ports::extract::{Answer, Role, Stored, recovering};
use crate::reply::Reply;
use async_trait::async_trait;
use proxypool_core::{
    ClientId, ExtractMode, ExtractOutcome, ExtractRequest, ExtractResponse, ExtractionId,
    Extractor, PoolError, PoolResult, ProxyId, Unavailable, UnixMillis,
};
use std::collections::HashSet;

/// The shortest a claim lives: long enough for one attempt over every group.
const MIN_CLAIM_MS: u64 = 60_000;

/// What the parts of one attempt brought.
struct Parts {
    /// The encoded records (EXTRACTED), in the order the groups were asked.
    records: Vec<String>,
    /// What is left of the reserve and of the scan budget.
    reserve: u32,
    budget: usize,
    /// A group that found too little said records are withheld after a loss.
    recovering: Option<PoolError>,
}

impl Parts {
    fn add(&mut self, stored: Stored) {
        self.reserve -= stored.reserved.min(self.reserve);
        self.budget -= stored.examined.min(self.budget);
        self.records
            .extend(stored.text.split('\n').skip(1).map(str::to_owned));
    }
}

impl RedisPool {
    /// The index of the group the extraction `id` is anchored in.
    fn anchor_index(&self, id: &ExtractionId) -> usize {
        self.index_of(id.as_str())
    }

    /// Takes the parts of groups `anchor + from ..` under `token` until `request.count` is
    /// reached.
    async fn take_parts(
        &self,
        now: UnixMillis,
        request: &ExtractRequest,
        id: &ExtractionId,
        (token, digest): (&str, &str),
        (anchor, from): (usize, usize),
        parts: &mut Parts,
    ) -> PoolResult<()> {
        let groups = self.groups();
        let n = groups.len();
        for i in from..n {
            let wanted = request.count as usize - parts.records.len();
            if wanted == 0 {
                break;
            }
            let part = ExtractRequest {
                count: wanted as u32,
                mode: ExtractMode::Partial,
                reserve_for_gateway: parts.reserve,
                idempotency_key: None,
                key_held_ms: 0,
                ..request.clone()
            };
            let key = keys::extraction_part(id, token);
            let role = Role::Part {
                budget: parts.budget,
            };
            match groups[(anchor + i) % n]
                .extract_stored(now, &part, key, digest.to_owned(), role)
                .await
            {
                Ok(Answer::Stored(stored)) => parts.add(stored),
                Ok(_) => return Err(PoolError::corrupt("unexpected extract reply")),
                Err(e @ PoolError::Unavailable(Unavailable::StoreRecovering { .. })) => {
                    parts.recovering.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every group gives back its part taken under `token`.
    async fn undo_parts(
        &self,
        now: UnixMillis,
        id: &ExtractionId,
        client: &ClientId,
        token: &str,
    ) -> PoolResult<()> {
        let key = keys::extraction_part(id, token);
        for group in self.groups() {
            group.undo_part(now, &key, client.as_str()).await?;
        }
        Ok(())
    }

    /// Steps 2 and 3 for the claim `token` in `anchor_group`: the remaining parts, then the
    /// claim ended one way or the other.
    #[allow(clippy::too_many_arguments)]
    async fn finish_claim(
        &self,
        now: UnixMillis,
        request: &ExtractRequest,
        id: &ExtractionId,
        claim: &ClaimKeys,
        token: &str,
        (anchor, from): (usize, usize),
        mut parts: Parts,
    ) -> PoolResult<ExtractOutcome> {
        let anchor_group: &GroupPool = &self.groups()[anchor];
        let taken = self
            .take_parts(
                now,
                request,
                id,
                (token, &claim.digest),
                (anchor, from),
                &mut parts,
            )
            .await;
        let failure = match taken {
            Ok(()) => {
                let got = parts.records.len() as u32;
                let short = request.mode == ExtractMode::AllOrNothing && got < request.count;
                match parts.recovering {
                    Some(e) if got == 0 || short => e,
                    _ if short => PoolError::InsufficientInventory {
                        requested: request.count,
                        matching: got,
                    },
                    _ => {
                        let held = request
                            .idempotency_key
                            .is_some()
                            .then_some(request.key_held_ms);
                        let ended = anchor_group
                            .end_claim(
                                now,
                                claim,
                                token,
                                ClaimEnd::Complete,
                                request.count,
                                request.idempotency_ttl_ms,
                                held,
                                parts.records,
                            )
                            .await?;
                        match ended.status.as_str() {
                            "ok" => return outcome(id, &ended, false),
                            "replay" => return outcome(id, &ended, true),
                            // Another attempt aborted the claim: what this one took goes back.
                            _ => PoolError::Unavailable(Unavailable::Store(
                                "an extraction over several groups was ended by another attempt"
                                    .to_owned(),
                            )),
                        }
                    }
                }
            }
            Err(e) => e,
        };
        let ended = anchor_group
            .end_claim(
                now,
                claim,
                token,
                ClaimEnd::Abort,
                request.count,
                request.idempotency_ttl_ms,
                None,
                Vec::new(),
            )
            .await?;
        if ended.status == "replay" {
            return outcome(id, &ended, true);
        }
        self.undo_parts(now, id, &request.client, token).await?;
        Err(failure)
    }
}

/// A replayed or completed response from an `xend.lua` reply.
fn outcome(id: &ExtractionId, reply: &Reply, replayed: bool) -> PoolResult<ExtractOutcome> {
    Ok(ExtractOutcome {
        response: extraction::decode(id, &reply.text(0)?)?.response,
        replayed,
    })
}

impl RedisPool {
    /// `response` as its client may read it now: the proxies it gave back since without
    /// their credentials. One read per group that holds any of its proxies.
    async fn without_given_back(
        &self,
        now: UnixMillis,
        response: ExtractResponse,
    ) -> PoolResult<ExtractResponse> {
        let mut by_group: Vec<Vec<&ProxyId>> = vec![Vec::new(); self.groups().len()];
        for proxy in response.proxies.iter().filter(|p| !p.returned) {
            by_group[self.group_index(&proxy.id)].push(&proxy.id);
        }
        let mut held: HashSet<ProxyId> = HashSet::new();
        for (group, ids) in self.groups().iter().zip(&by_group) {
            if ids.is_empty() {
                continue;
            }
            // Boxed: the call's future is deep, and this one sits inside the port's.
            let flags = Box::pin(group.holding(now, &response.client, ids)).await?;
            held.extend(
                ids.iter()
                    .zip(flags)
                    .filter(|(_, held)| *held)
                    .map(|(id, _)| (*id).clone()),
            );
        }
        Ok(response.without_given_back(|id| held.contains(id)))
    }

    /// [`Extractor::extract`] before a replay is read against what the client still holds.
    async fn extract_stored_or_new(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        if let Some(one) = self.single() {
            return one.extract(now, request).await;
        }
        request.validate()?;
        let id = request.extraction_id();
        let anchor = self.anchor_index(&id);
        let claim = ClaimKeys {
            response: keys::extraction(&id),
            claim: keys::extraction_claim(&id),
            client: request.client.to_string(),
            digest: request.digest(),
        };
        let token = proxypool_core::random::hex(16)
            .map_err(|e| PoolError::Unavailable(Unavailable::Store(e.to_string())))?;
        let claim_ms = request
            .idempotency_ttl_ms
            .max(request.key_held_ms)
            .max(MIN_CLAIM_MS);
        let part_key = keys::extraction_part(&id, &token);
        let role = Role::Anchor {
            claim: &claim.claim,
            part: &part_key,
            token: &token,
            claim_ms,
        };
        let first = self.groups()[anchor]
            .extract_stored(
                now,
                &request,
                claim.response.clone(),
                claim.digest.clone(),
                role,
            )
            .await?;
        let mut parts = Parts {
            records: Vec::new(),
            reserve: request.reserve_for_gateway,
            budget: self.options().extract_scan_budget,
            recovering: None,
        };
        match first {
            Answer::Stored(stored) => {
                let replayed = stored.replayed;
                Ok(ExtractOutcome {
                    response: extraction::decode(&id, &stored.text)?.response,
                    replayed,
                })
            }
            // An earlier attempt left a claim: every part, the anchor's first, is replayed
            // or taken under it.
            Answer::Claimed(earlier) => {
                self.finish_claim(now, &request, &id, &claim, &earlier, (anchor, 0), parts)
                    .await
            }
            Answer::Short {
                part,
                first_release,
            } => {
                parts.add(part);
                parts.recovering = first_release.map(|at| recovering(at, now));
                self.finish_claim(now, &request, &id, &claim, &token, (anchor, 1), parts)
                    .await
            }
        }
    }
}

#[async_trait]
impl Extractor for RedisPool {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        let mut outcome = self.extract_stored_or_new(now, request).await?;
        // A fresh extraction holds everything it hands out; a replay is a copy of an old
        // answer, never a new grant of a proxy given back since.
        if outcome.replayed {
            outcome.response = self.without_given_back(now, outcome.response).await?;
        }
        Ok(outcome)
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse> {
        let response = self.groups()[self.anchor_index(id)]
            .get_extraction(now, client, id)
            .await?;
        self.without_given_back(now, response).await
    }
}
