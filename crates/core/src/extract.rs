//! Exclusive extraction: requests, responses and the request digest.

use crate::cooldown::Domain;
use crate::error::PoolError;
use crate::geo::{GeoLabel, GeoValues, MAX_GEO_VALUE};
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
///
/// Read from JSON as clients write it (`FilterFields`): `country` is another name for
/// `region` (giving both is refused), and the geo values are canonicalised, so a value
/// that names no place is refused with the field's name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ProxyFilter {
    pub protocol: Option<Protocol>,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub upstream: Option<UpstreamId>,
    /// The geo labels (`crate::geo`), each in its canonical form (set them with
    /// [`ProxyFilter::set_geo`]): a proxy matches when its label of that key is equal.
    /// Flattened, and each left out of the serialized form when unset, so a request
    /// without them keeps the digest it always had.
    #[serde(flatten)]
    pub geo: GeoValues,
}

/// The longest geo filter value taken as written, in characters (its canonical form is
/// bounded by [`crate::geo::MAX_GEO_VALUE`] bytes too).
pub const MAX_GEO_FILTER_CHARS: usize = 64;

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
            // Stored labels are canonical (`prepare_batch`), as the filter's values are.
            && GeoLabel::ALL.into_iter().all(|label| {
                self.geo.get(label).is_none_or(|wanted| {
                    record.labels.get(label.key()).map(String::as_str) == Some(wanted)
                })
            })
    }

    /// Filters on `label` by `value` as a client wrote it (`New York`, `AS7922`), kept in
    /// its canonical form so it compares equal with the stored labels. A value that names
    /// no place is refused with a message that says what is accepted (without the field's
    /// name, which the caller knows) and the filter is left as it was.
    pub fn set_geo(&mut self, label: GeoLabel, value: &str) -> Result<(), PoolError> {
        *self.geo.slot(label) = Some(canonical_geo(label, value).map_err(PoolError::invalid)?);
        Ok(())
    }

    /// Checks that no geo value is another spelling of a canonical one (a filter built in
    /// code without [`ProxyFilter::set_geo`] could hold `New York`, which would match
    /// nothing in one store and, were a store to canonicalise, something in another).
    /// The canonical form is its own canonical form, so a value passes only when
    /// canonicalising it changes nothing.
    pub fn validate(&self) -> Result<(), PoolError> {
        for label in GeoLabel::ALL {
            if let Some(value) = self.geo.get(label)
                && label.canonical(value).as_deref() != Some(value)
            {
                return Err(PoolError::invalid(format!(
                    "filters.{}: {}",
                    label.key(),
                    geo_rule(label)
                )));
            }
        }
        Ok(())
    }
}

/// A filter as a client writes it, before `region` and its alias are merged.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterFields {
    #[serde(default)]
    protocol: Option<Protocol>,
    #[serde(default)]
    region: Option<Label>,
    /// What vendors and clients mostly call the region.
    #[serde(default)]
    country: Option<Label>,
    #[serde(default)]
    carrier: Option<Label>,
    #[serde(default)]
    upstream: Option<UpstreamId>,
    #[serde(default, deserialize_with = "geo_field::city")]
    city: Option<String>,
    #[serde(default, deserialize_with = "geo_field::state")]
    state: Option<String>,
    #[serde(default, deserialize_with = "geo_field::asn")]
    asn: Option<String>,
}

impl<'de> Deserialize<'de> for ProxyFilter {
    /// An object only: a derived struct would take an array of the fields too.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = FilterFields;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of filters")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<FilterFields, A::Error> {
                FilterFields::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        let fields = d.deserialize_map(Object)?;
        ProxyFilter::try_from(fields).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<FilterFields> for ProxyFilter {
    type Error = String;

    fn try_from(fields: FilterFields) -> Result<Self, String> {
        let region = match (fields.region, fields.country) {
            (Some(_), Some(_)) => {
                return Err(
                    "country is another name for region: give one of them, not both".into(),
                );
            }
            (region, country) => region.or(country),
        };
        Ok(ProxyFilter {
            protocol: fields.protocol,
            region,
            carrier: fields.carrier,
            upstream: fields.upstream,
            geo: GeoValues {
                city: fields.city,
                state: fields.state,
                asn: fields.asn,
            },
        })
    }
}

/// The geo fields of `FilterFields`, canonical as they are read, so an error names the
/// field.
mod geo_field {
    use super::{GeoLabel, canonical_geo};
    use serde::{Deserialize, Deserializer, de::Error};

    fn read<'de, D: Deserializer<'de>>(d: D, label: GeoLabel) -> Result<Option<String>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|value| canonical_geo(label, &value).map_err(D::Error::custom))
            .transpose()
    }

    pub(super) fn city<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        read(d, GeoLabel::City)
    }

    pub(super) fn state<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        read(d, GeoLabel::State)
    }

    pub(super) fn asn<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        read(d, GeoLabel::Asn)
    }
}

/// `value`'s canonical form as a `label` filter, or what such a filter may be.
/// Stricter than the canonical form on what it reads: words are separated by plain spaces
/// (a tab or a line break in a filter is a mistake, not a separator).
fn canonical_geo(label: GeoLabel, value: &str) -> Result<String, String> {
    let plain = value.chars().all(|c| c == ' ' || !c.is_whitespace());
    (plain && value.chars().count() <= MAX_GEO_FILTER_CHARS)
        .then(|| label.canonical(value))
        .flatten()
        .ok_or_else(|| geo_rule(label))
}

/// What a geo filter value may be.
fn geo_rule(label: GeoLabel) -> String {
    match label {
        GeoLabel::City | GeoLabel::State => format!(
            "must be letters and digits in any case, words separated by spaces, -, + or _, \
             at most {MAX_GEO_FILTER_CHARS} characters ({MAX_GEO_VALUE} bytes once lower-cased \
             with one _ between words)"
        ),
        GeoLabel::Asn => {
            "must be an autonomous system number, with or without AS (AS7922 or 7922)".to_owned()
        }
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
        self.filter.validate()?;
        if self.count == 0 || self.count > MAX_EXTRACT_COUNT {
            return Err(PoolError::invalid(format!(
                "count must be between 1 and {MAX_EXTRACT_COUNT}"
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
    /// The proxy's geo labels (`crate::geo`, canonical), what the geo filters compare.
    #[serde(default)]
    pub city: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub asn: Option<String>,
    pub usable_until_ms: UnixMillis,
    pub expires_at_ms: UnixMillis,
    /// The client gave the proxy back (`CooldownStore::return_extracted`): its credentials
    /// are no longer shown, and nobody else is handed the proxy in this generation.
    #[serde(default)]
    pub returned: bool,
}

impl ExtractedProxy {
    /// This entry as it reads once its client gave the proxy back: marked returned and
    /// without its credentials.
    pub fn given_back(&mut self) {
        self.username = None;
        self.password = None;
        self.returned = true;
    }
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
            city: record.labels.get(GeoLabel::City.key()).cloned(),
            state: record.labels.get(GeoLabel::State.key()).cloned(),
            asn: record.labels.get(GeoLabel::Asn.key()).cloned(),
            usable_until_ms: record.usable_until_ms,
            expires_at_ms: record.hard_expiry_ms,
            returned: false,
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

    /// The response as its client may read it now (a replay, `get_extraction`): each proxy
    /// the client no longer holds from it (`holds` false: it gave it back) is shown
    /// returned, without credentials. A stored response is a copy of what was handed out,
    /// not a grant: it never serves the credentials of a proxy that went back to the pool.
    pub fn without_given_back(mut self, mut holds: impl FnMut(&ProxyId) -> bool) -> Self {
        for proxy in &mut self.proxies {
            if !proxy.returned && !holds(&proxy.id) {
                proxy.given_back();
            }
        }
        self
    }
}

/// Whether a vendor's listing of a proxy that was extracted and given back (it stays
/// EXTRACTED and withheld from everyone until its hard expiry) starts a new generation of
/// it: new credentials, or a later issue time. The client that gave it back may still hold
/// the old credentials, so only the vendor re-issuing the proxy makes it safe to hand out
/// again (after a passing check, as any fetched proxy).
pub fn renews_given_back(incumbent: &ProxyRecord, fresh: &ProxyRecord) -> bool {
    fresh.credentials != incumbent.credentials || fresh.issued_at_ms > incumbent.issued_at_ms
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
    fn a_count_out_of_range_is_refused_in_words() {
        for count in [0, MAX_EXTRACT_COUNT + 1] {
            let mut bad = request(None);
            bad.count = count;
            let error = bad.validate().unwrap_err().to_string();
            assert!(
                error.contains(&format!("count must be between 1 and {MAX_EXTRACT_COUNT}")),
                "{error}"
            );
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

    fn record_with(labels: &[(&str, &str)]) -> ProxyRecord {
        let mut candidate = crate::Candidate::new(Protocol::Http, "p.vendor.test", 8080);
        for (key, value) in labels {
            candidate.labels.insert((*key).into(), (*value).into());
        }
        let batch = crate::FetchedBatch {
            upstream: UpstreamId::new("acme").unwrap(),
            operation_id: None,
            ttl_ms: 60_000,
            safety_margin_ms: 5_000,
            max_size: 10,
            default_max_sessions: 1,
            candidates: vec![candidate],
        };
        crate::prepare_batch(1_000, &batch)
            .unwrap()
            .records
            .remove(0)
    }

    #[test]
    fn geo_filters_are_kept_canonical_and_match_the_stored_labels() {
        let record = record_with(&[("city", "New York"), ("state", "NY"), ("asn", "AS7922")]);
        let mut filter = ProxyFilter::default();
        filter.set_geo(GeoLabel::City, "new-YORK").unwrap();
        filter.set_geo(GeoLabel::State, "ny").unwrap();
        filter.set_geo(GeoLabel::Asn, "as7922").unwrap();
        assert_eq!(
            (
                filter.geo.get(GeoLabel::City),
                filter.geo.get(GeoLabel::Asn)
            ),
            (Some("new_york"), Some("7922"))
        );
        assert!(filter.matches(&record));
        filter.validate().unwrap();

        let mut other = filter.clone();
        other.set_geo(GeoLabel::City, "Boston").unwrap();
        assert!(!other.matches(&record));
        assert!(!filter.matches(&record_with(&[("state", "ny"), ("asn", "7922")])));

        // Refused values leave the filter as it was.
        for (label, bad) in [
            (GeoLabel::City, "new;york"),
            (GeoLabel::City, ""),
            (GeoLabel::City, "new\tyork"),
            (GeoLabel::Asn, "7922\n"),
            (GeoLabel::State, &"a".repeat(MAX_GEO_FILTER_CHARS + 1)),
            (GeoLabel::Asn, "AS-7922"),
            (GeoLabel::Asn, "4294967296"),
        ] {
            let mut kept = filter.clone();
            let error = kept.set_geo(label, bad).unwrap_err();
            assert!(matches!(error, PoolError::InvalidInput(_)), "{bad:?}");
            assert_eq!(kept, filter, "{bad:?}");
        }
    }

    #[test]
    fn a_geo_filter_not_in_canonical_form_is_refused() {
        let mut bad = request(None);
        bad.filter.geo.city = Some("New York".into());
        let error = bad.validate().unwrap_err();
        assert!(error.to_string().contains("filters.city"), "{error}");
        let mut good = request(None);
        good.filter.geo.city = Some("new_york".into());
        good.validate().unwrap();
        // A letter whose lower case carries a combining mark is stored without it.
        let mut dotted = request(None);
        dotted.filter.set_geo(GeoLabel::City, "İstanbul").unwrap();
        assert_eq!(dotted.filter.geo.city.as_deref(), Some("istanbul"));
        dotted.validate().unwrap();
    }

    #[test]
    fn geo_filters_are_part_of_the_request_identity() {
        let plain = request(None);
        // A request without geo filters keeps the digest it had before they existed.
        let before = serde_json::json!({
            "count": 1,
            "mode": "partial",
            "filter": {"protocol": null, "region": null, "carrier": null, "upstream": null},
            "min_health_freshness_ms": null,
        });
        assert_eq!(
            plain.digest(),
            digest_hex(&[before.to_string().as_bytes()], 16)
        );
        let mut digests = std::collections::HashSet::from([plain.digest()]);
        for label in GeoLabel::ALL {
            let mut geo = request(None);
            geo.filter.set_geo(label, "1").unwrap();
            assert!(digests.insert(geo.digest()), "{label:?}");
        }
        let (mut written, mut canonical) = (request(None), request(None));
        written.filter.set_geo(GeoLabel::City, "New York").unwrap();
        canonical
            .filter
            .set_geo(GeoLabel::City, "new_york")
            .unwrap();
        assert_eq!(
            written.digest(),
            canonical.digest(),
            "one place, one request"
        );
    }

    #[test]
    fn filters_are_read_as_clients_write_them() {
        let read = |json: &str| serde_json::from_str::<ProxyFilter>(json);
        let country = read(r#"{"country": "US", "city": "New York", "asn": "AS7922"}"#).unwrap();
        assert_eq!(country.region, Some(Label::new("us").unwrap()));
        assert_eq!(
            (
                country.geo.get(GeoLabel::City),
                country.geo.get(GeoLabel::Asn)
            ),
            (Some("new_york"), Some("7922"))
        );
        assert_eq!(
            read(r#"{"region": "us", "city": "new_york", "asn": "7922"}"#).unwrap(),
            country
        );
        assert_eq!(
            read(r#"{"region": null, "country": "us"}"#).unwrap().region,
            country.region
        );

        let both = read(r#"{"region": "us", "country": "us"}"#).unwrap_err();
        assert!(both.to_string().contains("not both"), "{both}");
        let bad = read(r#"{"state": "new;york"}"#).unwrap_err();
        assert!(bad.to_string().contains("letters and digits"), "{bad}");
        assert!(read(r#"{"colour": "red"}"#).is_err());
        assert!(read(r#"[null, null]"#).is_err(), "an object only");
        assert!(read(r#"null"#).is_err());
        // What is written back (the request digest's input) names the region as region.
        let written = serde_json::to_value(&country).unwrap();
        assert_eq!(written["region"], "us");
        assert!(written.get("country").is_none() && written.get("state").is_none());
    }

    #[test]
    fn a_proxy_given_back_reads_returned_without_credentials() {
        let mut held = record_with(&[]);
        held.credentials = Some(crate::Credentials::new("u", "p"));
        let mut back = held.clone();
        back.id = ProxyId::new(format!("{:032x}", 2)).unwrap();
        let response = ExtractResponse {
            id: ExtractionId::new(format!("ex_{:032x}", 1)).unwrap(),
            client: ClientId::new("c").unwrap(),
            requested: 2,
            returned: 2,
            proxies: vec![ExtractedProxy::from(&held), ExtractedProxy::from(&back)],
            created_at_ms: 1,
        };
        assert!(response.proxies.iter().all(|p| !p.returned));
        let read = response.clone().without_given_back(|id| *id == held.id);
        assert_eq!(read.proxies[0], response.proxies[0]);
        let shown = &read.proxies[1];
        assert!(shown.returned && shown.username.is_none() && shown.password.is_none());
        assert_eq!((&shown.host, shown.port), (&back.host, back.port));
        // The count of what was handed out stays; a second pass changes nothing.
        assert_eq!(read.returned, 2);
        assert_eq!(read.clone().without_given_back(|_| true), read);
    }

    #[test]
    fn only_new_credentials_or_a_later_issue_renew_a_proxy_given_back() {
        let mut incumbent = record_with(&[]);
        incumbent.credentials = Some(crate::Credentials::new("u", "p"));
        incumbent.issued_at_ms = Some(100);
        let listed = |credentials: Option<crate::Credentials>, issued: Option<u64>| {
            let mut fresh = incumbent.clone();
            fresh.credentials = credentials;
            fresh.issued_at_ms = issued;
            fresh
        };
        let same = Some(crate::Credentials::new("u", "p"));
        let other = Some(crate::Credentials::new("u", "p2"));
        for (fresh, renews) in [
            (listed(same.clone(), Some(100)), false),
            (listed(same.clone(), Some(99)), false),
            (listed(same.clone(), None), false),
            (listed(same.clone(), Some(101)), true),
            (listed(other, Some(100)), true),
            (listed(None, Some(100)), true),
        ] {
            assert_eq!(renews_given_back(&incumbent, &fresh), renews, "{fresh:?}");
        }
    }
}
