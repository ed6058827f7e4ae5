//! Extractor: request validation, digest and extraction id from core; selection,
//! exclusivity, the reserve, all-or-nothing and the stored response in `extract.lua`.

use crate::codec::{clamp_ms, extraction, opt_to_field};
use crate::keys;
use crate::pool::{RedisPool, Side};
use crate::reply;
use async_trait::async_trait;
use proxypool_core::store_mark::recovery_retry_after_ms;
use proxypool_core::{
    ClientId, ExtractMode, ExtractOutcome, ExtractRequest, ExtractResponse, ExtractionId,
    Extractor, PoolError, PoolResult, Unavailable, UnixMillis,
};

#[async_trait]
impl Extractor for RedisPool {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        request.validate()?;
        let id = request.extraction_id();
        let filter = &request.filter;
        let args = vec![
            keys::extraction(&id),
            request.client.to_string(),
            request.digest(),
            request.count.to_string(),
            match request.mode {
                ExtractMode::Partial => "partial",
                ExtractMode::AllOrNothing => "all",
            }
            .to_owned(),
            request.reserve_for_gateway.to_string(),
            opt_to_field(request.min_health_freshness_ms.map(clamp_ms)),
            clamp_ms(request.idempotency_ttl_ms).to_string(),
            opt_to_field(filter.protocol),
            opt_to_field(filter.region.as_ref()),
            opt_to_field(filter.carrier.as_ref()),
            opt_to_field(filter.upstream.as_ref()),
            self.options.extract_scan_budget.to_string(),
            if request.idempotency_key.is_some() {
                clamp_ms(request.key_held_ms).to_string()
            } else {
                String::new()
            },
            opt_to_field(request.for_domain.as_ref()),
            opt_to_field(request.project.as_ref()),
        ];
        let value = self
            .eval(&self.scripts.extract, now, Side::Write, args)
            .await?;
        if let Some(first_release) = reply::recovering(&value) {
            return Err(PoolError::Unavailable(Unavailable::StoreRecovering {
                retry_after_ms: recovery_retry_after_ms(first_release, clamp_ms(now)),
            }));
        }
        let reply = reply::parse(value, request.count)?;
        let stored = extraction::decode(&id, &reply.text(0)?)?;
        match reply.status.as_str() {
            "replay" => Ok(ExtractOutcome {
                response: stored.response,
                replayed: true,
            }),
            "ok" => {
                // The script mirrors ExtractResponse::replay_ttl_ms; keep them in step.
                debug_assert_eq!(
                    stored.expires_at_ms,
                    clamp_ms(now)
                        + stored
                            .response
                            .replay_ttl_ms(clamp_ms(now), clamp_ms(request.idempotency_ttl_ms))
                );
                Ok(ExtractOutcome {
                    response: stored.response,
                    replayed: false,
                })
            }
            other => Err(PoolError::corrupt(format!(
                "unexpected extract reply {other}"
            ))),
        }
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse> {
        let Some(value) = self.get(&keys::extraction(id)).await? else {
            return Err(PoolError::NotFound);
        };
        let value = String::from_utf8(value)
            .map_err(|_| PoolError::corrupt("undecodable extraction in redis"))?;
        let stored = extraction::decode(id, &value)?;
        // The logical expiry decides; the key's native TTL only frees memory later.
        if now < stored.expires_at_ms && &stored.client == client {
            Ok(stored.response)
        } else {
            Err(PoolError::NotFound)
        }
    }
}
