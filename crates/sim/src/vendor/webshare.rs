//! A list API in Webshare's shape (`GET /api/v2/proxy/list/?mode=direct`), as its public
//! documentation describes it, so the controller is tried against a vendor as it really
//! writes its list:
//!
//! - `Authorization: Token <token>` (DRF's `{"detail": ...}` and 401 otherwise);
//! - `mode=direct` required (400 without it: the simulated vendor has no backbone mode);
//! - Django REST framework pagination: `?page=N` from 1 and `page_size` (default
//!   [`ApiConfig::page_size`](super::ApiConfig)), the body
//!   `{"count", "next", "previous", "results": [...]}` with `next` and `previous` as full
//!   URLs built from the request's `Host` (null at either end), and 404
//!   `{"detail": "Invalid page."}` past the last page;
//! - each result: `id` (`"d-..."`), `username`, `password`, `proxy_address`, `port`,
//!   `valid`, `last_verification`, `country_code`, `city_name`, `asn_name`, `asn_number`,
//!   `high_country_confidence`, and `created_at` as ISO 8601 with microseconds and an
//!   offset (`+00:00`, or the same instant at `-07:00` on every other entry);
//! - only the fleet's HTTP proxies are listed (a Webshare proxy speaks HTTP, and SOCKS5 on
//!   the same port; the list names no protocol, so a list reader takes each as `http`);
//! - every third entry (positions 2, 5, 8, ...) is `"valid": false`;
//! - gzip- (or deflate-) encoded, as [`ApiKnobs::encoding`](super::ApiKnobs) says;
//! - with [`ApiKnobs::webshare_port`](super::ApiKnobs) set, a request that reaches any
//!   other port of the endpoint is answered `301` to the same path and query on that
//!   port of the same host (a vendor that moved its API to another port).

use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::api::{encode_body, json_status};
use super::config::{ApiConfig, ApiKnobs};
use super::listing::Listing;
use crate::http::{Body, respond};
use crate::upstream::ProxyKind;

/// The list's path.
pub(super) const WEBSHARE_LIST: &str = "/api/v2/proxy/list/";

/// Cities and networks given to the entries, in turn.
const CITIES: &[&str] = &["New York", "Los Angeles", "São Paulo"];
const NETWORKS: &[(&str, u32)] = &[("COMCAST-7922", 7922), ("DTAG", 3320), ("AS-GOOGLE", 15169)];

/// The proxies the list names: the fleet's HTTP proxies, in the fleet's order.
pub(super) fn listed(listings: Vec<Listing>) -> Vec<Listing> {
    listings
        .into_iter()
        .filter(|listing| listing.protocol == ProxyKind::Http)
        .collect()
}

/// Whether the entry at `position` of the list is `"valid": true`.
pub fn webshare_valid(position: usize) -> bool {
    position % 3 != 2
}

/// Answers a request for the list with `query` and `headers` (whose `Host` says which
/// port it reached, and is where the page links point).
pub(super) fn answer_webshare(
    config: &ApiConfig,
    knobs: &ApiKnobs,
    query: &str,
    headers: &HeaderMap,
    listings: &[Listing],
) -> Response<Body> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    if let Some(port) = knobs.webshare_port {
        let (name, arrived) = host.rsplit_once(':').unwrap_or((host, "80"));
        if arrived != port.to_string() {
            let mut response = respond(StatusCode::MOVED_PERMANENTLY, "");
            let target = format!("http://{name}:{port}{WEBSHARE_LIST}?{query}");
            if let Ok(location) = HeaderValue::from_str(&target) {
                response.headers_mut().insert(header::LOCATION, location);
            }
            return response;
        }
    }
    let expected = format!("Token {}", config.token);
    if headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        != Some(expected.as_bytes())
    {
        return json_status(
            StatusCode::UNAUTHORIZED,
            &json!({"detail": "Invalid token."}),
        );
    }
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    };
    if param("mode") != Some("direct") {
        return json_status(
            StatusCode::BAD_REQUEST,
            &json!({"mode": ["The simulated vendor lists mode=direct only."]}),
        );
    }
    let number = match param("page").map(str::parse::<usize>) {
        None => 1,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => return invalid_page(),
    };
    let size = match param("page_size").map(str::parse::<usize>) {
        None => config.page_size.max(1),
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => return invalid_page(),
    };
    let pages = listings.len().div_ceil(size).max(1);
    if number > pages {
        return invalid_page();
    }
    let results: Vec<Value> = listings
        .iter()
        .enumerate()
        .skip((number - 1) * size)
        .take(size)
        .map(|(position, listing)| entry(position, listing))
        .collect();
    let link = |page: usize| {
        let mut pairs: Vec<String> = query
            .split('&')
            .filter(|pair| !pair.is_empty() && !pair.starts_with("page="))
            .map(str::to_owned)
            .collect();
        pairs.push(format!("page={page}"));
        Value::from(format!("http://{host}{WEBSHARE_LIST}?{}", pairs.join("&")))
    };
    let body = json!({
        "count": listings.len(),
        "next": if number < pages { link(number + 1) } else { Value::Null },
        "previous": if number > 1 { link(number - 1) } else { Value::Null },
        "results": results,
    });
    encode_body(knobs, &body)
}

fn invalid_page() -> Response<Body> {
    json_status(StatusCode::NOT_FOUND, &json!({"detail": "Invalid page."}))
}

/// One proxy as Webshare writes it.
fn entry(position: usize, listing: &Listing) -> Value {
    let (asn_name, asn_number) = NETWORKS[position % NETWORKS.len()];
    // The same instant written at two offsets, as vendors in different zones would.
    let offset_minutes = if position.is_multiple_of(2) {
        0
    } else {
        -7 * 60
    };
    json!({
        "id": format!("d-{}", 10_000 + position),
        "username": listing.username,
        "password": listing.password,
        "proxy_address": listing.host,
        "port": listing.port,
        "valid": webshare_valid(position),
        "last_verification": iso8601(listing.issued_at_ms, 0),
        "country_code": listing.region.as_deref().unwrap_or("us").to_ascii_uppercase(),
        "city_name": CITIES[position % CITIES.len()],
        "asn_name": asn_name,
        "asn_number": asn_number,
        "high_country_confidence": true,
        "created_at": iso8601(listing.issued_at_ms, offset_minutes),
    })
}

/// `ms` since the Unix epoch as `2026-11-03T16:19:03.018000+00:00` at `offset_minutes`.
pub fn iso8601(ms: u64, offset_minutes: i64) -> String {
    let local = ms as i64 / 1000 + offset_minutes * 60;
    let micros = (ms % 1000) * 1000;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let offset = offset_minutes.abs();
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}{sign}{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        offset / 60,
        offset % 60
    )
}

/// The date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_at_any_offset() {
        assert_eq!(
            iso8601(1_793_722_743_018, 0),
            "2026-11-03T16:19:03.018000+00:00"
        );
        assert_eq!(
            iso8601(1_793_722_743_018, -420),
            "2026-11-03T09:19:03.018000-07:00"
        );
        assert_eq!(iso8601(0, 0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(
            iso8601(951_825_600_000, 330),
            "2000-02-29T17:30:00.000000+05:30"
        );
    }

    #[test]
    fn every_third_entry_is_invalid() {
        let valid: Vec<bool> = (0..6).map(webshare_valid).collect();
        assert_eq!(valid, [true, true, false, true, true, false]);
    }
}
