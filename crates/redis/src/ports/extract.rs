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
    Extractor, GeoLabel, PoolError, PoolResult, ProxyId, Unavailable, UnixMillis,
};

/// A stored response as one group's extraction script answered it: its text, whether it
/// was replayed, and (when not) how many matching proxies the call left behind as the
/// reserve and how many candidates it examined.
pub(crate) struct Stored {
    pub(crate) text: String,
    pub(crate) replayed: bool,
    pub(crate) reserved: u32,
    pub(crate) examined: usize,
}

/// What a call of `extract.lua` is, in an extraction over several groups.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role<'a> {
    /// The whole extraction (one group).
    Whole,
    /// One group's part, stored at the call's key, with the scan budget left to it.
    Part { budget: usize },
    /// The first call, in the group the extraction id picks: it answers alone when it finds
    /// everything, else leaves its part at `part` under a new claim `token` at `claim`.
    Anchor {
        claim: &'a str,
        part: &'a str,
        token: &'a str,
        claim_ms: u64,
    },
}

/// How `extract.lua` answered.
pub(crate) enum Answer {
    /// The response stored at the call's key (new or replayed).
    Stored(Stored),
    /// (anchor) An earlier attempt's claim, to resume.
    Claimed(String),
    /// (anchor) Too little in this group: its part, and the first release of the records a
    /// recovery withholds here, if any.
    Short {
        part: Stored,
        first_release: Option<u64>,
    },
}

impl GroupPool {
    /// Runs `extract.lua` for `request` with its response stored at `key` under `digest`,
    /// in the given role. Errors as the port's.
    pub(crate) async fn extract_stored(
        &self,
        now: UnixMillis,
        request: &ExtractRequest,
        key: String,
        digest: String,
        role: Role<'_>,
    ) -> PoolResult<Answer> {
        let budget = match role {
            Role::Part { budget } => budget,
            _ => self.options.extract_scan_budget,
        };
        let filter = &request.filter;
        let mut args = vec![
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
        ];
        // The geo filters, canonical (checked by `request.validate`): compared as they are
        // with the record's stored labels.
        args.extend(
            GeoLabel::ALL.map(|label| filter.geo.get(label).unwrap_or_default().to_owned()),
        );
        match role {
            Role::Whole => {}
            Role::Part { .. } => args.push("part".to_owned()),
            Role::Anchor {
                claim,
                part,
                token,
                claim_ms,
            } => args.extend([
                "anchor".to_owned(),
                claim.to_owned(),
                part.to_owned(),
                token.to_owned(),
                claim_ms.to_string(),
            ]),
        }
        let value = self
            .eval(&self.scripts.extract, now, Side::Write, args)
            .await?;
        if let Some(first_release) = reply::recovering(&value) {
            return Err(recovering(first_release, now));
        }
        let reply = reply::parse(value, request.count)?;
        let fresh = |reply: &reply::Reply| -> PoolResult<Stored> {
            Ok(Stored {
                text: reply.text(0)?,
                replayed: false,
                reserved: u32::try_from(reply.number(1)?).unwrap_or(u32::MAX),
                examined: usize::try_from(reply.number(2)?).unwrap_or(usize::MAX),
            })
        };
        match reply.status.as_str() {
            "replay" => Ok(Answer::Stored(Stored {
                text: reply.text(0)?,
                replayed: true,
                reserved: 0,
                examined: 0,
            })),
            "ok" => Ok(Answer::Stored(fresh(&reply)?)),
            "claimed" => Ok(Answer::Claimed(reply.text(0)?)),
            "short" => {
                let first = reply.text(3)?;
                Ok(Answer::Short {
                    part: fresh(&reply)?,
                    first_release: if first.is_empty() {
                        None
                    } else {
                        Some(crate::codec::parse_u64(&first, "extract reply")?)
                    },
                })
            }
            other => Err(PoolError::corrupt(format!(
                "unexpected extract reply {other}"
            ))),
        }
    }
}

impl GroupPool {
    /// Which of `ids` (all in this group) `client` still holds from an extraction
    /// (`holding.lua`), in their order.
    pub(crate) async fn holding(
        &self,
        now: UnixMillis,
        client: &ClientId,
        ids: &[&ProxyId],
    ) -> PoolResult<Vec<bool>> {
        let mut args = Vec::with_capacity(ids.len() + 1);
        args.push(client.to_string());
        args.extend(ids.iter().map(|id| id.to_string()));
        let flags = self
            .call(&self.scripts.holding, now, Side::Read, args)
            .await?
            .text(0)?;
        if flags.len() != ids.len() {
            return Err(PoolError::corrupt("unexpected holding reply"));
        }
        Ok(flags.bytes().map(|b| b == b'1').collect())
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
        let key = keys::extraction(&id);
        let Answer::Stored(stored) = self
            .extract_stored(now, &request, key, request.digest(), Role::Whole)
            .await?
        else {
            return Err(PoolError::corrupt("unexpected extract reply"));
        };
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
