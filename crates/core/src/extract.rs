//! Exclusive extraction: requests, responses and the request digest.

use crate::cooldown::Domain;
use crate::error::PoolError;
use crate::ids::{ClientId, ExtractionId, Label, ProjectId, ProxyId, UpstreamId, digest_hex};
use crate::proxy::{Protocol, ProxyRecord};
use crate::secret::Secret;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// Most proxies one extraction may ask for.
pub const MAX_EXTRACT_COUNT: u32 = 1_000;

/// The longest health-freshness window an extraction may ask for (one day): proxies live
/// minutes to hours, so a longer window means "any checked proxy" and is refused as a
/// likely mistake rather than silently accepted.
pub const MAX_HEALTH_FRESHNESS_MS: u64 = 86_400_000;
/// The longest an idempotency key may be held past its replay (one day).
pub const MAX_KEY_HELD_MS: u64 = 86_400_000;
const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// Which proxies an extraction (or a gateway selection) may take. Unset fields match all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyFilter {
    pub protocol: Option<Protocol>,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub upstream: Option<UpstreamId>,
}

impl ProxyFilter {
    pub fn matches(&self, record: &ProxyRecord) -> bool {
        self.protocol.is_none_or(|p| p == record.protocol)
            && self
                .region
                .as_ref()
                .is_none_or(|r| record.region.as_ref() == Some(r))
            && self
                .carrier
                .as_ref()
                .is_none_or(|c| record.carrier.as_ref() == Some(c))
            && self.upstream.as_ref().is_none_or(|u| &record.upstream == u)
    }
}

/// All-or-nothing changes nothing unless every requested proxy is found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractMode {
    #[default]
    Partial,
    AllOrNothing,
}

/// One extraction request, as the distribution API hands it to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractRequest {
    pub client: ClientId,
    /// Same key + same request = the stored response; same key + other request = conflict.
    pub idempotency_key: Option<String>,
    /// The API's request id: names the extraction when there is no idempotency key.
    pub request_id: String,
    pub count: u32,
    pub mode: ExtractMode,
    pub filter: ProxyFilter,
    /// Only proxies whose last successful check is at most this old.
    pub min_health_freshness_ms: Option<u64>,
    /// Matching proxies to leave in the pool for the gateway (configuration, not the client).
    pub reserve_for_gateway: u32,
    /// How long the response stays replayable (capped by the earliest hard expiry in it).
    pub idempotency_ttl_ms: u64,
    /// With an idempotency key: how long, from now, the key stays bound to this request
    /// even after its response can no longer be replayed. Within it a reuse of the key is
    /// refused (`Conflict::IdempotencyExpired`, or `IdempotencyDigest` for another body),
    /// never extracted afresh. The API sets it to the client's quota window, the longest a
    /// quota receipt for the key lives: a key admitted as a replay can then never buy a
    /// second extraction. 0 = only as long as the replay.
    pub key_held_ms: u64,
    /// Only proxies not cooling down for this registrable domain (`crate::cooldown`): in
    /// the shared scope or in `project`'s.
    pub for_domain: Option<Domain>,
    /// The client's project, whose own cooldowns `for_domain` honours besides the shared
    /// ones (`None`: the shared ones only).
    pub project: Option<ProjectId>,
}

impl ExtractRequest {
    /// Whether the client narrowed what matches (a filter, a health freshness, a domain's
    /// cooldowns): a scan that runs out of budget on such a request was made long by the
    /// client's own choice, so it is the client's cost, not the service's failure.
    pub fn narrowed_by_client(&self) -> bool {
        self.filter != ProxyFilter::default()
            || self.min_health_freshness_ms.is_some()
            || self.for_domain.is_some()
    }

    /// Checks the request before any store work.
    pub fn validate(&self) -> Result<(), PoolError> {
        if self.count == 0 || self.count > MAX_EXTRACT_COUNT {
            return Err(PoolError::invalid(format!(
                "count must be in 1..={MAX_EXTRACT_COUNT}"
            )));
        }
        if self
            .min_health_freshness_ms
            .is_some_and(|ms| ms > MAX_HEALTH_FRESHNESS_MS)
        {
            return Err(PoolError::invalid(format!(
                "min_health_freshness_ms must be at most {MAX_HEALTH_FRESHNESS_MS} (one day)"
            )));
        }
        if let Some(key) = &self.idempotency_key {
            validate_idempotency_key(key)?;
        }
        if self.request_id.is_empty()
            || self.request_id.len() > 128
            || self.request_id.chars().any(|c| c.is_control())
        {
            return Err(PoolError::invalid(
                "request_id must be 1-128 printable characters",
            ));
        }
        if self.idempotency_ttl_ms == 0 {
            return Err(PoolError::invalid("idempotency_ttl_ms must be at least 1"));
        }
        if self.key_held_ms > MAX_KEY_HELD_MS {
            return Err(PoolError::invalid(format!(
                "key_held_ms must be at most {MAX_KEY_HELD_MS} (one day)"
            )));
        }
        Ok(())
    }

    /// A digest of everything the client chose, so a reused key with another body is caught.
    pub fn digest(&self) -> String {
        let mut body = serde_json::json!({
            "count": self.count,
            "mode": self.mode,
            "filter": self.filter,
            "min_health_freshness_ms": self.min_health_freshness_ms,
        });
        // Only when set, so a request without it keeps the digest it always had.
        if let Some(domain) = &self.for_domain {
            body["for_domain"] = serde_json::json!(domain);
        }
        digest_hex(&[body.to_string().as_bytes()], 16)
    }

    /// Until when the stored extraction answers for its id: the replay's end, or, with an
    /// idempotency key, `now + key_held_ms` if that is later.
    pub fn held_until(&self, now: UnixMillis, replay_expires_at_ms: UnixMillis) -> UnixMillis {
        if self.idempotency_key.is_some() {
            replay_expires_at_ms.max(now.saturating_add(self.key_held_ms))
        } else {
            replay_expires_at_ms
        }
    }

    pub fn extraction_id(&self) -> ExtractionId {
        ExtractionId::derive(
            &self.client,
            self.idempotency_key.as_deref(),
            &self.request_id,
        )
    }

    /// Whether `record` passes every filter and the freshness requirement at `now`.
    pub fn accepts(&self, now: UnixMillis, record: &ProxyRecord) -> bool {
        record.is_usable(now)
            && self.filter.matches(record)
            && self
                .min_health_freshness_ms
                .is_none_or(|fresh| record.is_fresh(now, fresh))
    }
}

/// `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,254}$`
pub fn validate_idempotency_key(key: &str) -> Result<(), PoolError> {
    let mut chars = key.chars();
    let valid = key.len() <= MAX_IDEMPOTENCY_KEY_LEN
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-'));
    if valid {
        Ok(())
    } else {
        Err(PoolError::invalid(
            "idempotency key must be 1-255 characters of [A-Za-z0-9._:/-] starting with a letter or digit",
        ))
    }
}

/// One proxy handed out, with what the client needs to use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractedProxy {
    pub id: ProxyId,
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub upstream: UpstreamId,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub usable_until_ms: UnixMillis,
    pub expires_at_ms: UnixMillis,
}

impl From<&ProxyRecord> for ExtractedProxy {
    fn from(record: &ProxyRecord) -> Self {
        ExtractedProxy {
            id: record.id.clone(),
            protocol: record.protocol,
            host: record.host.clone(),
            port: record.port,
            username: record.credentials.as_ref().map(|c| c.username.clone()),
            password: record.credentials.as_ref().map(|c| c.password.clone()),
            upstream: record.upstream.clone(),
            region: record.region.clone(),
            carrier: record.carrier.clone(),
            usable_until_ms: record.usable_until_ms,
            expires_at_ms: record.hard_expiry_ms,
        }
    }
}

/// The stored (and replayable) result of an extraction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractResponse {
    pub id: ExtractionId,
    pub client: ClientId,
    pub requested: u32,
    pub returned: u32,
    pub proxies: Vec<ExtractedProxy>,
    pub created_at_ms: UnixMillis,
}

impl ExtractResponse {
    /// How long the response may be replayed: the idempotency TTL, cut at the earliest hard
    /// expiry it contains (a replay never hands out a dead proxy). At least 1 ms.
    pub fn replay_ttl_ms(&self, now: UnixMillis, idempotency_ttl_ms: u64) -> u64 {
        let earliest = self.proxies.iter().map(|p| p.expires_at_ms).min();
        let cap = earliest.map_or(idempotency_ttl_ms, |at| at.saturating_sub(now));
        idempotency_ttl_ms.min(cap).max(1)
    }
}

/// An extraction's response and whether it was a replay of a stored one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractOutcome {
    pub response: ExtractResponse,
    pub replayed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(freshness: Option<u64>) -> ExtractRequest {
        ExtractRequest {
            project: None,
            for_domain: None,
            client: ClientId::new("c").unwrap(),
            idempotency_key: None,
            request_id: "req-1".into(),
            count: 1,
            mode: ExtractMode::Partial,
            filter: ProxyFilter::default(),
            min_health_freshness_ms: freshness,
            reserve_for_gateway: 0,
            idempotency_ttl_ms: 1_000,
            key_held_ms: 0,
        }
    }

    #[test]
    fn a_health_freshness_window_over_a_day_is_refused() {
        assert!(request(None).validate().is_ok());
        assert!(request(Some(MAX_HEALTH_FRESHNESS_MS)).validate().is_ok());
        let error = request(Some(MAX_HEALTH_FRESHNESS_MS + 1))
            .validate()
            .unwrap_err();
        assert!(
            error.to_string().contains("min_health_freshness_ms"),
            "{error}"
        );
    }
}
