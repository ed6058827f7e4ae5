//! `proxypool extract`: a small client of `POST /v1/extractions`.
//!
//! Prints the proxies as a table (one ready-to-use proxy URL per row) or, with `--json`,
//! the API's answer as is. The token is read from an environment variable, never from a
//! flag, so it stays out of shell history and process listings. The exit code tells a
//! script what happened without parsing anything:
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | proxies extracted (all of them, or some in `partial` mode) |
//! | 1 | the API could not be reached, or answered something unexpected |
//! | 2 | bad flags or request (`invalid_request`, a missing token variable) |
//! | 3 | not authenticated or not allowed (`unauthenticated`, `forbidden`) |
//! | 4 | not enough matching proxies (`insufficient_inventory`, or none returned) |
//! | 5 | rate limited or over quota (429; `Retry-After` is printed) |
//! | 6 | the service is unavailable (503; retry later) |
//! | 7 | the idempotency key was used for a different request |

use crate::args::ExtractArgs;
use crate::failure::Failure;
use crate::http_client::{self, BaseUrl};
use hyper::Method;
use proxypool_api::wire::{ExtractionView, ProxyView};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Exit codes (see the module docs).
mod code {
    pub(super) const UNREACHABLE: u8 = 1;
    pub(super) const INVALID: u8 = 2;
    pub(super) const DENIED: u8 = 3;
    pub(super) const INSUFFICIENT: u8 = 4;
    pub(super) const LIMITED: u8 = 5;
    pub(super) const UNAVAILABLE: u8 = 6;
    pub(super) const CONFLICT: u8 = 7;
}

/// The API's error body.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
    #[serde(default)]
    request_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

pub(crate) async fn run(args: ExtractArgs) -> Result<(), Failure> {
    let token = proxypool_config::Env::from_process()
        .get(&args.token_env)
        .map(str::to_owned)
        .ok_or_else(|| {
            Failure::new(
                code::INVALID,
                format!(
                    "set {} to your API token (or name another variable with --token-env)",
                    args.token_env
                ),
            )
        })?;
    let base = BaseUrl::parse(&args.api).map_err(|e| Failure::new(code::INVALID, e))?;
    let tls = match &args.ca {
        Some(_) if !base.is_tls() => {
            return Err(Failure::new(
                code::INVALID,
                "--ca needs an https:// API URL",
            ));
        }
        Some(ca) => Some(
            proxypool_edge::ClientTls::load(&proxypool_edge::ClientTlsFiles {
                ca: Some(ca.clone()),
                ..Default::default()
            })
            .map_err(|e| Failure::new(code::INVALID, format!("--ca: {e}")))?,
        ),
        None => None,
    };
    let mut headers = vec![
        ("authorization", format!("Bearer {token}")),
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json".to_owned()),
    ];
    if let Some(key) = &args.idempotency_key {
        headers.push(("idempotency-key", key.clone()));
    }
    let answer = http_client::send(
        &base,
        tls.as_ref(),
        Method::POST,
        "/v1/extractions",
        &headers,
        Some(request_body(&args).to_string().into_bytes()),
        Duration::from_secs(args.timeout.max(1)),
    )
    .await
    .map_err(|e| Failure::new(code::UNREACHABLE, e))?;

    if answer.status == 200 || answer.status == 201 {
        let view: ExtractionView = serde_json::from_slice(&answer.body).map_err(|e| {
            Failure::new(
                code::UNREACHABLE,
                format!("unexpected answer from the API: {e}"),
            )
        })?;
        if args.json {
            println!("{}", String::from_utf8_lossy(&answer.body));
        } else {
            print_table(&view);
        }
        if view.returned == 0 {
            return Err(Failure::new(
                code::INSUFFICIENT,
                "no matching proxies available right now",
            ));
        }
        return Ok(());
    }

    let retry_after = answer
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(|s| format!(" (retry after {s}s)"))
        .unwrap_or_default();
    match serde_json::from_slice::<ErrorBody>(&answer.body) {
        Ok(body) => {
            if args.json {
                println!("{}", String::from_utf8_lossy(&answer.body));
            }
            let request = body
                .request_id
                .map(|id| format!(" [request {id}]"))
                .unwrap_or_default();
            Err(Failure::new(
                exit_code(answer.status, &body.error.code),
                format!(
                    "{} {}: {}{retry_after}{request}",
                    answer.status, body.error.code, body.error.message
                ),
            ))
        }
        Err(_) => Err(Failure::new(
            exit_code(answer.status, ""),
            format!("the API answered {}{retry_after}", answer.status),
        )),
    }
}

fn request_body(args: &ExtractArgs) -> serde_json::Value {
    let mut filters = serde_json::Map::new();
    for (key, value) in [
        ("protocol", &args.protocol),
        ("region", &args.region),
        ("carrier", &args.carrier),
        ("upstream", &args.upstream),
        ("city", &args.city),
        ("state", &args.state),
        ("asn", &args.asn),
    ] {
        if let Some(value) = value {
            filters.insert(key.into(), json!(value));
        }
    }
    let mut body = json!({
        "count": args.count,
        "mode": args.mode.wire(),
        "filters": filters,
    });
    if let Some(ms) = args.min_health_freshness_ms {
        body["min_health_freshness_ms"] = json!(ms);
    }
    body
}

fn exit_code(status: u16, error: &str) -> u8 {
    match (status, error) {
        (_, "insufficient_inventory") => code::INSUFFICIENT,
        (_, "idempotency_conflict" | "idempotency_key_expired") => code::CONFLICT,
        (401 | 403, _) => code::DENIED,
        (429, _) => code::LIMITED,
        (503, _) => code::UNAVAILABLE,
        (400 | 404 | 405 | 413 | 415 | 422, _) => code::INVALID,
        _ => code::UNREACHABLE,
    }
}

/// A readable table: one usable proxy URL per row, and how long it stays usable.
fn print_table(view: &ExtractionView) {
    println!(
        "extraction {}: {} of {} proxies",
        view.id, view.returned, view.requested
    );
    if view.proxies.is_empty() {
        return;
    }
    let now = proxypool_core::now_millis();
    let rows: Vec<[String; 6]> = view
        .proxies
        .iter()
        .map(|p| {
            [
                proxy_url(p),
                p.upstream.to_string(),
                p.region.as_ref().map_or("-".into(), |r| r.to_string()),
                p.city.clone().unwrap_or_else(|| "-".into()),
                p.carrier.as_ref().map_or("-".into(), |c| c.to_string()),
                format!("{}s", p.usable_until.saturating_sub(now) / 1000),
            ]
        })
        .collect();
    let header = [
        "PROXY",
        "UPSTREAM",
        "REGION",
        "CITY",
        "CARRIER",
        "USABLE FOR",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 6]| {
        cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    println!("{}", line(header));
    for row in &rows {
        println!("{}", line(row.each_ref().map(String::as_str)));
    }
}

/// `scheme://user:pass@host:port`, what curl's `-x` and most clients take.
fn proxy_url(proxy: &ProxyView) -> String {
    let scheme = match serde_json::to_value(proxy.protocol) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "http".into(),
    };
    let auth = match (&proxy.username, &proxy.password) {
        (Some(user), Some(pass)) => format!("{user}:{pass}@"),
        (Some(user), None) => format!("{user}@"),
        _ => String::new(),
    };
    let host = if proxy.host.contains(':') {
        format!("[{}]", proxy.host)
    } else {
        proxy.host.clone()
    };
    format!("{scheme}://{auth}{host}:{}", proxy.port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Mode;

    #[test]
    fn builds_the_request_and_maps_errors_to_exit_codes() {
        let args = ExtractArgs {
            api: "http://x".into(),
            token_env: "T".into(),
            ca: None,
            count: 3,
            mode: Mode::AllOrNothing,
            protocol: Some("socks5".into()),
            region: None,
            carrier: None,
            upstream: Some("sim".into()),
            city: Some("New York".into()),
            state: None,
            asn: Some("AS7922".into()),
            min_health_freshness_ms: None,
            idempotency_key: None,
            json: false,
            timeout: 1,
        };
        assert_eq!(
            request_body(&args),
            json!({"count": 3, "mode": "all_or_nothing",
                   "filters": {"protocol": "socks5", "upstream": "sim",
                               "city": "New York", "asn": "AS7922"}})
        );
        assert_eq!(exit_code(409, "insufficient_inventory"), code::INSUFFICIENT);
        assert_eq!(exit_code(409, "idempotency_conflict"), code::CONFLICT);
        assert_eq!(exit_code(409, "idempotency_key_expired"), code::CONFLICT);
        assert_eq!(exit_code(401, "unauthenticated"), code::DENIED);
        assert_eq!(exit_code(429, "quota_exceeded"), code::LIMITED);
        assert_eq!(exit_code(503, "unavailable"), code::UNAVAILABLE);
        assert_eq!(exit_code(400, "invalid_request"), code::INVALID);
    }

    fn parsed(flags: &[&str]) -> Result<ExtractArgs, clap::Error> {
        use clap::Parser;
        let argv = ["proxypool", "extract"].iter().chain(flags);
        match crate::args::Cli::try_parse_from(argv)?.command {
            crate::args::Command::Extract(args) => Ok(args),
            _ => unreachable!("the extract subcommand"),
        }
    }

    #[test]
    fn country_is_the_region_and_the_geo_flags_are_sent_as_written() {
        let args = parsed(&["--country", "DE", "--city", "São Paulo", "--state", "SP"]).unwrap();
        assert_eq!(
            request_body(&args)["filters"],
            json!({"region": "DE", "city": "São Paulo", "state": "SP"})
        );
        let both = parsed(&["--region", "us", "--country", "de"]).unwrap_err();
        assert_eq!(both.exit_code(), i32::from(code::INVALID), "{both}");
    }
}
