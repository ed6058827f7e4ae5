//! One access-log line: a JSON object with the same keys on every line (a value the
//! request never reached is `null`), so a collector can map the fields once.
//!
//! `time` is when the request was read (RFC 3339, UTC, milliseconds) and `duration_ms`
//! runs from then to the last byte of the answer or the tunnel's close. `status` is the
//! HTTP status the client got (`http`, `connect`), `socks_reply` the SOCKS5 reply code
//! (`socks5`); `code` is the gateway's refusal code when it refused. `path` is the path of
//! a forwarded request (`http`, and `https` for a request inside an inspected tunnel),
//! never its query (tokens travel there); `target` stays `host:port` for every kind. `bytes_up` counts
//! payload from the client toward the target, `bytes_down` the other way (a plain HTTP
//! request's and response's bodies, a tunnel's bytes).

use serde::Serialize;
use std::fmt::Display;
use std::net::SocketAddr;
use std::time::SystemTime;

/// The fields of one line, borrowed from the finished exchange.
#[derive(Serialize)]
pub(crate) struct Line<'a> {
    #[serde(serialize_with = "rfc3339_millis")]
    pub time: SystemTime,
    pub kind: &'static str,
    /// Serialized as `ip:port` (`[v6]:port`), its display form: no string made for it.
    pub source: SocketAddr,
    pub client: Option<&'a str>,
    pub method: Option<&'a str>,
    #[serde(serialize_with = "displayed")]
    pub target: Option<&'a dyn Display>,
    pub path: Option<&'a str>,
    pub upstream: Option<&'a str>,
    pub proxy: Option<&'a str>,
    pub status: Option<u16>,
    pub socks_reply: Option<u8>,
    pub code: Option<&'static str>,
    pub attempts: u32,
    pub bytes_up: u64,
    pub bytes_down: u64,
    #[serde(serialize_with = "three_decimals")]
    pub duration_ms: f64,
}

impl Line<'_> {
    /// The line as JSON with its newline.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(320);
        // Plain data with string keys: serializing cannot fail.
        let _ = serde_json::to_writer(&mut out, self);
        out.push(b'\n');
        out
    }
}

fn rfc3339_millis<S: serde::Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*time))
}

/// Written straight into the line (an address is never made a string first).
fn displayed<S: serde::Serializer>(value: &Option<&dyn Display>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => s.collect_str(value),
        None => s.serialize_none(),
    }
}

/// Microsecond resolution is all a duration needs; more digits only lengthen the line.
fn three_decimals<S: serde::Serializer>(ms: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((ms * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_line_has_every_key_and_the_time_in_utc_milliseconds() {
        let line = Line {
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_428_800_123),
            kind: "http",
            source: "192.0.2.7:40000".parse().unwrap(),
            client: Some("alice"),
            method: Some("GET"),
            target: Some(&"example.test:80"),
            path: Some("/a/b"),
            upstream: Some("sim"),
            proxy: Some("p1"),
            status: Some(200),
            socks_reply: None,
            code: None,
            attempts: 1,
            bytes_up: 0,
            bytes_down: 512,
            duration_ms: 1.234_567,
        };
        let bytes = line.to_bytes();
        assert_eq!(bytes.last(), Some(&b'\n'));
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["time"], "2026-12-05T00:00:00.123Z");
        assert_eq!(value["source"], "192.0.2.7:40000");
        assert_eq!(value["duration_ms"], 1.235);
        assert_eq!(value["socks_reply"], serde_json::Value::Null);
        assert_eq!(value["path"], "/a/b");
        assert_eq!(value.as_object().unwrap().len(), 16, "{value}");
    }
}
