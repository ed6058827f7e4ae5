//! Extractor: request validation, digest and extraction id from core; selection,
//! exclusivity, the reserve, all-or-nothing and the stored response in `extract.lua`.

use crate::codec::{clamp_ms, extraction, opt_to_field};
use crate::group::{GroupPool, Side};
use crate::keys;
use crate::reply;
use async_trait::async_trait;
use proxypool_core::store_mark::recovery_retry_after_ms;
use proxypool_core::{
    ClientId, ExtractMode, ExtractOutcome, ExtractRequest, ExtractResponse, ExtractionId,
    Extractor, PoolError, PoolResult, Unavailable, UnixMillis,
};

/// How one group's extraction script answered: the stored response's text, whether it
/// was replayed, and (when not) how many matching proxies it left behind as the reserve
/// and how many candidates it examined.
pub(crate) struct Stored {
    pub(crate) text: String,
    pub(crate) replayed: bool,
    pub(crate) reserved: u32,
    pub(crate) examined: usize,
}

impl GroupPool {
    /// Runs `extract.lua` for `request` with its response stored at `key` under `digest`; a
    /// `part` is one group's share of an extraction over several groups, with the scan
    /// budget left to it (its usage counted by the home group when the whole completes).
    /// Errors as the port's.
    pub(crate) async fn extract_stored(
        &self,
        now: UnixMillis,
        request: &ExtractRequest,
        key: String,
        digest: String,
        part: Option<usize>,
    ) -> PoolResult<Stored> {
        let budget = part.unwrap_or(self.options.extract_scan_budget);
        let filter = &request.filter;
        let args = vec![
            key,
            request.client.to_string(),
            digest,
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
            budget.to_string(),
            if request.idempotency_key.is_some() {
                clamp_ms(request.key_held_ms).to_string()
            } else {
                String::new()
            },
            opt_to_field(request.for_domain.as_ref()),
            opt_to_field(request.project.as_ref()),
            if part.is_some() { "part" } else { "" }.to_owned(),
        ];
        let value = self
            .eval(&self.scripts.extract, now, Side::Write, args)
            .await?;
        if let Some(first_release) = reply::recovering(&value) {
            return Err(recovering(first_release, now));
        }
        let reply = reply::parse(value, request.count)?;
        let replayed = match reply.status.as_str() {
            "replay" => true,
            "ok" => false,
            other => {
                return Err(PoolError::corrupt(format!(
                    "unexpected extract reply {other}"
                )));
            }
        };
        let count =
            |i: usize| -> PoolResult<u64> { if replayed { Ok(0) } else { reply.number(i) } };
        Ok(Stored {
            text: reply.text(0)?,
            replayed,
            reserved: u32::try_from(count(1)?).unwrap_or(u32::MAX),
            examined: usize::try_from(count(2)?).unwrap_or(usize::MAX),
        })
    }
}

/// A store that withholds records after a loss, until `first_release`.
pub(crate) fn recovering(first_release: u64, now: UnixMillis) -> PoolError {
    PoolError::Unavailable(Unavailable::StoreRecovering {
        retry_after_ms: recovery_retry_after_ms(first_release, clamp_ms(now)),
    })
}

#[async_trait]
impl Extractor for GroupPool {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        request.validate()?;
        let id = request.extraction_id();
        let stored = self
            .extract_stored(now, &request, keys::extraction(&id), request.digest(), None)
            .await?;
        let decoded = extraction::decode(&id, &stored.text)?;
        if !stored.replayed {
            // The script mirrors ExtractResponse::replay_ttl_ms; keep them in step.
            debug_assert_eq!(
                decoded.expires_at_ms,
                clamp_ms(now)
                    + decoded
                        .response
                        .replay_ttl_ms(clamp_ms(now), clamp_ms(request.idempotency_ttl_ms))
            );
        }
        Ok(ExtractOutcome {
            response: decoded.response,
            replayed: stored.replayed,
        })
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
