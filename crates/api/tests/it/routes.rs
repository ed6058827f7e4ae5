//! The route table against the OpenAPI document and the live router, plus the operational
//! routes: health, readiness, metrics and the document itself.

use crate::common::*;
use proxypool_api::{OPENAPI_JSON, ROUTES};
use serde_json::Value;
use std::collections::BTreeSet;

fn documented_routes() -> BTreeSet<(String, String)> {
    let document: Value = serde_json::from_str(OPENAPI_JSON).unwrap();
    let mut routes = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            routes.insert((method.to_uppercase(), path.clone()));
        }
    }
    routes
}

#[test]
fn openapi_documents_exactly_the_served_routes() {
    let document: Value = serde_json::from_str(OPENAPI_JSON).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1."));
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(method, path)| (method.to_string(), path.to_string()))
        .collect();
    assert_eq!(documented_routes(), served);
}

#[test]
fn openapi_lists_every_error_code_and_the_headers() {
    let document: Value = serde_json::from_str(OPENAPI_JSON).unwrap();
    let codes: BTreeSet<&str> = document["components"]["schemas"]["Error"]["properties"]["error"]
        ["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|code| code.as_str().unwrap())
        .collect();
    for code in [
        "invalid_request",
        "unauthenticated",
        "forbidden",
        "not_found",
        "method_not_allowed",
        "idempotency_conflict",
        "idempotency_key_expired",
        "insufficient_inventory",
        "conflict",
        "body_timeout",
        "payload_too_large",
        "rate_limited",
        "quota_exceeded",
        "too_many_requests_in_flight",
        "unavailable",
        "internal",
    ] {
        assert!(codes.contains(code), "{code}");
    }
    let headers = document["components"]["headers"].as_object().unwrap();
    for header in ["RateLimit-Policy", "RateLimit", "Retry-After"] {
        assert!(headers.contains_key(header), "{header}");
    }
    assert!(OPENAPI_JSON.contains("NOT idempotent across requests"));
}

#[tokio::test]
async fn every_route_in_the_table_is_served() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 2).await;
    for (method, path) in ROUTES {
        let concrete = path.replace("{id}", "acme");
        let request = match *method {
            "GET" => server.http.get(server.url(&concrete)),
            "POST" => server
                .http
                .post(server.url(&concrete))
                .header("content-type", "application/json")
                .body(body(1).to_string()),
            "DELETE" => server.http.delete(server.url(&concrete)),
            other => panic!("unexpected method {other}"),
        };
        let reply = Reply::from(request.bearer_auth(ADMIN).send().await.unwrap()).await;
        assert_ne!(reply.status, 405, "{method} {path}");
        if reply.status == 404 {
            let message = reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .to_owned();
            assert_ne!(message, "no such route", "{method} {path} is not routed");
        }
        assert!(reply.header("x-request-id").is_some(), "{method} {path}");
        assert_eq!(
            reply.header("cache-control"),
            Some("no-store"),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn health_readiness_and_the_document() {
    let server = TestServer::memory(Setup::default()).await;
    let health = server.get("/healthz", None).await;
    assert_eq!(
        (health.status, health.json()["status"].as_str()),
        (200, Some("ok"))
    );
    let ready = server.get("/readyz", None).await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["checks"]["quota"], "ok");
    // Probes write nothing: the bucket the old probe charged stays empty.
    assert_eq!(server.get("/readyz", None).await.status, 200);
    assert_eq!(
        server
            .quota
            .consumed(
                "proxypool-readiness",
                "readyz",
                proxypool_quota::Operation::Inspect
            )
            .await,
        0
    );
    let document = server.get("/openapi.json", None).await;
    assert_eq!(document.status, 200);
    // The file as written, with the configured extraction maximum filled in.
    let mut expected: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
    expected["components"]["schemas"]["ExtractionRequest"]["properties"]["count"]["maximum"] =
        100.into();
    assert_eq!(document.json(), expected);
}

#[tokio::test]
async fn metrics_count_requests_extractions_denials_and_store_latency() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 3).await;
    assert_eq!(server.extract(ALICE, None, &body(2)).await.status, 200);
    assert_eq!(server.get("/v1/me", Some("token-nobody")).await.status, 401);
    let text = server.get("/metrics", None).await;
    assert_eq!(text.status, 200);
    assert!(
        text.header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    let text = text.text();
    for expected in [
        "# TYPE proxypool_api_requests_total counter",
        "proxypool_api_requests_total{route=\"/v1/extractions\",method=\"POST\",status=\"200\"}",
        "proxypool_api_requests_total{route=\"/v1/me\",method=\"GET\",status=\"401\"}",
        "proxypool_api_extractions_total{outcome=\"created\"}",
        "proxypool_api_extracted_proxies_total",
        "proxypool_api_store_duration_seconds_bucket{port=\"extractor\",call=\"extract\",le=\"+Inf\"}",
        "proxypool_api_store_duration_seconds_count{port=\"quota\",call=\"extract\"}",
        "proxypool_api_request_duration_seconds_count{route=\"/v1/extractions\"}",
        "# HELP proxypool_api_requests_total HTTP requests",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("pw-secret"), "no credential in metrics");
    assert!(!text.contains(ALICE), "no token in metrics");
}

#[tokio::test]
async fn metrics_behind_a_token_answer_only_that_token() {
    let server = TestServer::memory(Setup {
        metrics_token: Some("metrics-token-value"),
        ..Setup::default()
    })
    .await;
    server
        .get("/metrics", None)
        .await
        .assert_error(401, "unauthenticated");
    server
        .get("/metrics", Some("another-token"))
        .await
        .assert_error(401, "unauthenticated");
    // A client's API token is not the metrics token either.
    server
        .get("/metrics", Some(ALICE))
        .await
        .assert_error(401, "unauthenticated");
    let metrics = server.get("/metrics", Some("metrics-token-value")).await;
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    assert!(metrics.text().contains("# TYPE"), "{}", metrics.text());
}

/// Tenants' usage is private: without a metrics token no series naming a client is shown.
#[tokio::test]
async fn per_client_series_are_left_out_without_the_metrics_token() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 3).await;
    assert_eq!(server.extract(ALICE, None, &body(1)).await.status, 200);
    let text = server.get("/metrics", None).await.text();
    assert!(
        text.contains("proxypool_api_extractions_total{outcome=\"created\"}"),
        "{text}"
    );
    assert!(
        !text.contains("client=\""),
        "a tenant's series leaked:\n{text}"
    );
    // The family keeps its help and type; none of its series is shown.
    assert!(
        !text.contains("\nproxypool_usage_extracted_total{"),
        "{text}"
    );
}

#[tokio::test]
async fn the_metrics_token_shows_per_client_series() {
    let server = TestServer::memory(Setup {
        metrics_token: Some("metrics-token-value"),
        ..Setup::default()
    })
    .await;
    server.seed("acme", 0, 3).await;
    assert_eq!(server.extract(ALICE, None, &body(1)).await.status, 200);
    let text = server
        .get("/metrics", Some("metrics-token-value"))
        .await
        .text();
    assert!(
        text.contains("proxypool_usage_extracted_total{client=\"alice\",upstream=\"acme\"}"),
        "{text}"
    );
}
