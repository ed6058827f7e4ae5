//! Extraction over groups. The home group keeps the extraction's claim and, once it ends,
//! the merged response every replay and `get_extraction` reads; each group keeps its part.
//!
//! 1. `xbegin.lua` (home): the stored response (replay or conflict), else the claim in
//!    force, this call's or the one an earlier attempt of the same request left.
//! 2. One group after another, from a group the extraction id picks (so requests spread
//!    over the groups), takes at most what is still missing as that group's part, stored
//!    under the claim's token: an attempt that resumes the claim replays each part instead
//!    of taking it again. The reserve (`reserve_for_gateway`) and the scan budget are the
//!    whole extraction's: each group leaves behind what is left of the reserve and examines
//!    at most what is left of the budget.
//! 3. `xend.lua` (home): completes the claim with the merged response, or, when the whole
//!    falls short (all-or-nothing short of `count`) or a group failed,
//!    aborts it; every group then gives its part back (`xundo.lua`), so an all-or-nothing
//!    extraction that fails holds nothing. Whoever ends a claim first decides for every
//!    attempt sharing it; an attempt that lost gives back what it took under it.
//!
//! Between steps 2 and 3 an all-or-nothing extraction that will fail holds its parts for a
//! moment, so a concurrent extraction may find less than it would have: the cost of taking
//! across groups without a lock over them. No proxy is ever handed out twice.

use super::RedisPool;
use super::calls::{ClaimEnd, ClaimKeys};
use crate::codec::extraction;
use crate::keys;
use crate::reply::Reply;
use async_trait::async_trait;
use proxypool_core::{
    ClientId, ExtractMode, ExtractOutcome, ExtractRequest, ExtractResponse, ExtractionId,
    Extractor, PoolError, PoolResult, Unavailable, UnixMillis,
};

/// The shortest a claim lives: long enough for one attempt over every group.
const MIN_CLAIM_MS: u64 = 60_000;

/// What the parts of one attempt brought.
#[derive(Default)]
struct Parts {
    /// The encoded records (EXTRACTED), in the order the groups were asked.
    records: Vec<String>,
    /// A group that found nothing said records are withheld after a loss.
    recovering: Option<PoolError>,
}

impl RedisPool {
    /// Takes each group's part under `token` until `request.count` is reached.
    async fn take_parts(
        &self,
        now: UnixMillis,
        request: &ExtractRequest,
        id: &ExtractionId,
        token: &str,
        digest: &str,
    ) -> PoolResult<Parts> {
        let groups = self.groups();
        let n = groups.len();
        let start = usize::from(id.as_str().as_bytes()[0]) % n;
        let mut reserve = request.reserve_for_gateway;
        let mut budget = self.options.extract_scan_budget;
        let mut parts = Parts::default();
        for i in 0..n {
            let wanted = request.count as usize - parts.records.len();
            if wanted == 0 {
                break;
            }
            let part = ExtractRequest {
                count: wanted as u32,
                mode: ExtractMode::Partial,
                reserve_for_gateway: reserve,
                idempotency_key: None,
                key_held_ms: 0,
                ..request.clone()
            };
            let key = keys::extraction_part(id, token);
            match groups[(start + i) % n]
                .extract_stored(now, &part, key, digest.to_owned(), Some(budget))
                .await
            {
                Ok(stored) => {
                    reserve -= stored.reserved.min(reserve);
                    budget -= stored.examined.min(budget);
                    parts
                        .records
                        .extend(stored.text.split('\n').skip(1).map(str::to_owned));
                }
                Err(PoolError::InsufficientInventory { .. }) => {}
                Err(e @ PoolError::Unavailable(Unavailable::StoreRecovering { .. })) => {
                    parts.recovering.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(parts)
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
}

/// A replayed or completed response from an `xbegin.lua`/`xend.lua` reply.
fn outcome(id: &ExtractionId, reply: &Reply, replayed: bool) -> PoolResult<ExtractOutcome> {
    Ok(ExtractOutcome {
        response: extraction::decode(id, &reply.text(0)?)?.response,
        replayed,
    })
}

#[async_trait]
impl Extractor for RedisPool {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        if let Some(one) = self.single() {
            return one.extract(now, request).await;
        }
        request.validate()?;
        let id = request.extraction_id();
        let claim = ClaimKeys {
            response: keys::extraction(&id),
            claim: keys::extraction_claim(&id),
            client: request.client.to_string(),
            digest: request.digest(),
        };
        let fresh = proxypool_core::random::hex(16)
            .map_err(|e| PoolError::Unavailable(Unavailable::Store(e.to_string())))?;
        let claim_ms = request
            .idempotency_ttl_ms
            .max(request.key_held_ms)
            .max(MIN_CLAIM_MS);
        let begun = self
            .home()
            .claim_extraction(now, &claim, &fresh, claim_ms)
            .await?;
        if begun.status == "replay" {
            return outcome(&id, &begun, true);
        }
        let token = begun.text(0)?;

        let taken = self
            .take_parts(now, &request, &id, &token, &claim.digest)
            .await;
        let failure = match taken {
            Ok(parts) => {
                let got = parts.records.len() as u32;
                let short = request.mode == ExtractMode::AllOrNothing && got < request.count;
                let recovering = got == 0 || short;
                if let (true, Some(e)) = (recovering, parts.recovering) {
                    e
                } else if !short {
                    let held = request
                        .idempotency_key
                        .is_some()
                        .then_some(request.key_held_ms);
                    let ended = self
                        .home()
                        .end_claim(
                            now,
                            &claim,
                            &token,
                            ClaimEnd::Complete,
                            request.count,
                            request.idempotency_ttl_ms,
                            held,
                            parts.records,
                        )
                        .await?;
                    match ended.status.as_str() {
                        "ok" => return outcome(&id, &ended, false),
                        "replay" => return outcome(&id, &ended, true),
                        // Another attempt aborted the claim: what this one took goes back.
                        _ => PoolError::Unavailable(Unavailable::Store(
                            "an extraction over several groups was ended by another attempt"
                                .to_owned(),
                        )),
                    }
                } else {
                    PoolError::InsufficientInventory {
                        requested: request.count,
                        matching: got,
                    }
                }
            }
            Err(e) => e,
        };
        let ended = self
            .home()
            .end_claim(
                now,
                &claim,
                &token,
                ClaimEnd::Abort,
                request.count,
                request.idempotency_ttl_ms,
                None,
                Vec::new(),
            )
            .await?;
        if ended.status == "replay" {
            return outcome(&id, &ended, true);
        }
        self.undo_parts(now, &id, &request.client, &token).await?;
        Err(failure)
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse> {
        self.home().get_extraction(now, client, id).await
    }
}
