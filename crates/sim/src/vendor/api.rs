//! The vendor's list API beside its plain list URL, as real vendors serve theirs:
//!
//! - `/api/v1/proxies` and `/api/v2/proxies`: a paginated JSON API behind
//!   `Authorization: Token <token>` (or `?key=<token>`), gzip- (or deflate-) encoded, with field names of its
//!   own: `{"result": {"items": [{"addr", "port_no", "kind", "login", "secret",
//!   "geo": {"country", "city"}, "isp", "valid_until", "issued"}]}, "links": {"next"}}`
//!   (`valid_until` and `issued` in Unix seconds; `next` relative, null on the last page,
//!   and the same link in a `Link: <...>; rel="next"` header).
//!   `?page=N` from 1; a page past the end is empty. `v1` answers with a redirect to the
//!   same page under `v2` when [`ApiKnobs::redirect_once`] is on.
//! - `/basic/proxies.txt`: the text list behind HTTP Basic, its lines cycling through
//!   every shape the controller reads (`host:port`, `host:port:user:pass`,
//!   `user:pass@host:port`, `scheme://user:pass@host:port`).
//!
//! [`ApiKnobs`] make it misbehave for tests: a redirect or a next link to a foreign URL, or
//! pages that are decompression bombs.

use std::io::Write;

use base64::Engine;
use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::config::{ApiConfig, ApiKnobs, ContentEncoding};
use super::listing::Listing;
use crate::http::{Body, full, respond};

/// The API's path that redirects (with [`ApiKnobs::redirect_once`]).
pub(super) const API_V1: &str = "/api/v1/proxies";
/// The API's path that serves pages.
pub(super) const API_V2: &str = "/api/v2/proxies";
/// The Basic-auth text list's path.
pub(super) const BASIC_TEXT: &str = "/basic/proxies.txt";

/// Answers an API request on `path` with `query`.
pub(super) fn answer_api(
    config: &ApiConfig,
    knobs: &ApiKnobs,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    listings: &[Listing],
) -> Response<Body> {
    let expected = format!("Token {}", config.token);
    let by_header = headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        == Some(expected.as_bytes());
    let by_query = query
        .split('&')
        .any(|pair| pair.strip_prefix("key=") == Some(config.token.as_str()));
    if !by_header && !by_query {
        return json_status(StatusCode::UNAUTHORIZED, &json!({"error": "unauthorized"}));
    }
    if path == API_V1 {
        let target = match (&knobs.foreign_redirect, knobs.redirect_once) {
            (Some(foreign), _) => foreign.clone(),
            (None, true) if query.is_empty() => API_V2.to_owned(),
            (None, true) => format!("{API_V2}?{query}"),
            (None, false) => return page(config, knobs, query, listings),
        };
        let mut response = respond(StatusCode::TEMPORARY_REDIRECT, "");
        if let Ok(location) = HeaderValue::from_str(&target) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        return response;
    }
    page(config, knobs, query, listings)
}

fn page(config: &ApiConfig, knobs: &ApiKnobs, query: &str, listings: &[Listing]) -> Response<Body> {
    if let Some(decoded) = knobs.bomb_bytes {
        return bomb(knobs, decoded);
    }
    let number = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let size = config.page_size.max(1);
    let pages = listings.len().div_ceil(size);
    let items: Vec<Value> = listings
        .iter()
        .skip((number - 1) * size)
        .take(size)
        .map(api_item)
        .collect();
    let next = match &knobs.foreign_next {
        Some(foreign) if number == 1 => Value::from(foreign.clone()),
        _ if number < pages => Value::from(format!("{API_V2}?page={}", number + 1)),
        _ => Value::Null,
    };
    let link = next
        .as_str()
        .and_then(|next| HeaderValue::from_str(&format!("<{next}>; rel=\"next\"")).ok());
    let body = json!({"result": {"items": items, "total_pages": pages}, "links": {"next": next}});
    let mut response = encode_body(knobs, &body);
    if let Some(link) = link {
        response.headers_mut().insert(header::LINK, link);
    }
    response
}

/// A 200 JSON answer, compressed as `knobs` say.
pub(super) fn encode_body(knobs: &ApiKnobs, body: &Value) -> Response<Body> {
    let plain = serde_json::to_vec(body).unwrap_or_default();
    let (encoded, name) = match knobs.encoding {
        ContentEncoding::Gzip => (
            encode(GzEncoder::new(Vec::new(), Compression::default()), &plain),
            "gzip",
        ),
        ContentEncoding::Deflate => (
            encode(ZlibEncoder::new(Vec::new(), Compression::default()), &plain),
            "deflate",
        ),
    };
    compressed(encoded, name)
}

/// A 200 JSON answer of `encoded`, compressed by the `Content-Encoding` `name`.
fn compressed(encoded: Vec<u8>, name: &'static str) -> Response<Body> {
    let mut response = Response::new(full(encoded));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(name));
    response
}

/// A 200 answer whose body decodes to `decoded` spaces, compressed a chunk at a time, so
/// the sim never holds what the body expands to.
fn bomb(knobs: &ApiKnobs, decoded: usize) -> Response<Body> {
    static CHUNK: [u8; 64 * 1024] = [b' '; 64 * 1024];
    fn write_all<W: Write + Finish>(mut encoder: W, decoded: usize) -> Vec<u8> {
        let mut left = decoded;
        while left > 0 {
            let n = left.min(CHUNK.len());
            let _ = encoder.write_all(&CHUNK[..n]);
            left -= n;
        }
        encoder.done()
    }
    let (encoded, name) = match knobs.encoding {
        ContentEncoding::Gzip => (
            write_all(GzEncoder::new(Vec::new(), Compression::best()), decoded),
            "gzip",
        ),
        ContentEncoding::Deflate => (
            write_all(ZlibEncoder::new(Vec::new(), Compression::best()), decoded),
            "deflate",
        ),
    };
    compressed(encoded, name)
}

/// Compresses `plain` with `encoder` (writes to a `Vec` cannot fail).
fn encode<W: Write + Finish>(mut encoder: W, plain: &[u8]) -> Vec<u8> {
    let _ = encoder.write_all(plain);
    encoder.done()
}

/// The two flate2 encoders' `finish`.
trait Finish {
    fn done(self) -> Vec<u8>;
}

impl Finish for GzEncoder<Vec<u8>> {
    fn done(self) -> Vec<u8> {
        self.finish().unwrap_or_default()
    }
}

impl Finish for ZlibEncoder<Vec<u8>> {
    fn done(self) -> Vec<u8> {
        self.finish().unwrap_or_default()
    }
}

/// One proxy in the API's own field names.
fn api_item(listing: &Listing) -> Value {
    json!({
        "addr": listing.host,
        "port_no": listing.port,
        "kind": listing.protocol.scheme(),
        "login": listing.username,
        "secret": listing.password,
        "geo": {"country": listing.region, "city": "Springfield"},
        "isp": listing.carrier,
        "valid_until": listing.expires_at_ms.map(|ms| ms / 1000),
        "issued": listing.issued_at_ms / 1000,
    })
}

/// Answers the Basic-auth text list.
pub(super) fn answer_basic(
    config: &ApiConfig,
    headers: &HeaderMap,
    listings: &[Listing],
) -> Response<Body> {
    let (user, pass) = &config.basic;
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    let expected = format!("Basic {credentials}");
    if headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        != Some(expected.as_bytes())
    {
        let mut response = respond(StatusCode::UNAUTHORIZED, "unauthorized\n");
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"sim\""),
        );
        return response;
    }
    let mut text: String = listings
        .iter()
        .enumerate()
        .map(|(i, listing)| listing.text_shape(i) + "\n")
        .collect();
    text.insert_str(0, "# every line shape, in turn\n");
    let mut response = respond(StatusCode::OK, text);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

pub(super) fn json_status(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = respond(status, serde_json::to_vec(body).unwrap_or_default());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
