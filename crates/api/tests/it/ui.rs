//! The dashboard's sign-in and the admin read routes it polls: the session cookie's
//! attributes, cookie authentication on the JSON routes, CSRF and same-site checks on every
//! write made with the cookie, sign-out, and the bounded proxy listing's input checks and
//! its reason for each proxy's last failed check.

use crate::common::*;
use proxypool_core::{WorkerId, WorkerMode, now_millis};
use serde_json::json;

struct Signed {
    cookie: String,
    csrf: String,
}

async fn sign_in(server: &TestServer, token: &str) -> Reply {
    sign_in_with(server, token, &[]).await
}

async fn sign_in_with(server: &TestServer, token: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = server
        .http
        .post(server.url("/ui/session"))
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Reply::from(
        request
            .body(json!({ "token": token }).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// A server that believes `X-Forwarded-For` from loopback, so one test can speak from
/// many addresses.
async fn behind_balancer(clients: Vec<proxypool_api::ApiClient>) -> TestServer {
    TestServer::memory(Setup {
        clients,
        trusted_proxies: vec![("127.0.0.1".parse().unwrap(), 32)],
        ..Setup::default()
    })
    .await
}

fn from(address: &str) -> [(&'static str, &str); 1] {
    [("x-forwarded-for", address)]
}

async fn signed_in(server: &TestServer) -> Signed {
    let reply = sign_in(server, ADMIN).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let set = reply.header("set-cookie").unwrap().to_owned();
    let cookie = set.split(';').next().unwrap().to_owned();
    Signed {
        cookie,
        csrf: reply.json()["csrf_token"].as_str().unwrap().to_owned(),
    }
}

async fn with_cookie(
    server: &TestServer,
    method: &str,
    path: &str,
    cookie: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = match method {
        "GET" => server.http.get(server.url(path)),
        "POST" => server.http.post(server.url(path)),
        "DELETE" => server.http.delete(server.url(path)),
        other => panic!("{other}"),
    }
    .header("cookie", cookie);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Reply::from(request.send().await.unwrap()).await
}

async fn live_worker(server: &TestServer, name: &str) {
    server
        .pool
        .open_session(now_millis(), &WorkerId::new(name).unwrap(), "s-1", 60_000)
        .await
        .unwrap();
}

async fn mode_of(server: &TestServer, name: &str) -> WorkerMode {
    let modes = server.pool.worker_modes().await.unwrap();
    modes
        .iter()
        .find(|m| m.worker.as_str() == name)
        .map_or(WorkerMode::Active, |m| m.mode)
}

#[tokio::test]
async fn sign_in_sets_a_strict_http_only_cookie_that_reads_the_admin_routes() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 3).await;

    let reply = sign_in(&server, ADMIN).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let set = reply.header("set-cookie").unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP listener: {set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    assert!(cookie.starts_with("pp_session=") && cookie.len() == "pp_session=".len() + 64);

    for path in [
        "/v1/admin/overview",
        "/v1/admin/proxies",
        "/v1/admin/clients",
        "/v1/admin/workers",
        "/v1/upstreams",
        "/ui/session",
    ] {
        let read = with_cookie(&server, "GET", path, &cookie, &[]).await;
        assert_eq!(read.status, 200, "{path}: {}", read.text());
        // The same answer without any credentials is refused, and says nothing.
        let anonymous = server.get(path, None).await;
        assert_eq!(anonymous.status, 401, "{path}");
        assert!(
            !anonymous.text().contains("acme"),
            "{path}: {}",
            anonymous.text()
        );
        let forged = with_cookie(
            &server,
            "GET",
            path,
            &format!("pp_session={}", "a".repeat(64)),
            &[],
        )
        .await;
        assert_eq!(forged.status, 401, "{path}");
    }
    let overview = with_cookie(&server, "GET", "/v1/admin/overview", &cookie, &[])
        .await
        .json();
    assert_eq!(overview["proxies"]["by_status"]["AVAILABLE"], 3);
    let listed = with_cookie(&server, "GET", "/v1/admin/proxies", &cookie, &[])
        .await
        .json();
    assert_eq!(listed["proxies"].as_array().unwrap().len(), 3);
    assert!(
        !listed.to_string().contains("pw-"),
        "no credentials in the listing"
    );
}

#[tokio::test]
async fn only_an_admin_token_signs_in() {
    let server = TestServer::memory(Setup::default()).await;
    assert_eq!(
        sign_in(&server, "token-nobody-0123456789").await.status,
        401
    );
    let client = sign_in(&server, ALICE).await;
    assert_eq!(client.status, 401, "{}", client.text());
    assert!(client.header("set-cookie").is_none());
    let oversize = Reply::from(
        server
            .http
            .post(server.url("/ui/session"))
            .header("content-type", "application/json")
            .body(json!({ "token": "x".repeat(20_000) }).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(oversize.status, 413);
    let overlong = sign_in(&server, &"x".repeat(513)).await;
    assert_eq!(overlong.status, 400, "{}", overlong.text());
    let cross_site = Reply::from(
        server
            .http
            .post(server.url("/ui/session"))
            .header("content-type", "application/json")
            .header("sec-fetch-site", "cross-site")
            .body(json!({ "token": ADMIN }).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(cross_site.status, 403);
}

#[tokio::test]
async fn a_write_with_the_cookie_needs_the_csrf_token_and_changes_nothing_without() {
    let server = TestServer::memory(Setup::default()).await;
    live_worker(&server, "gw-1").await;
    let session = signed_in(&server).await;
    let path = "/v1/admin/workers/gw-1/cordon";

    for headers in [
        vec![],
        vec![("x-csrf-token", "wrong")],
        vec![("x-csrf-token", "a".repeat(64).leak() as &str)],
    ] {
        let refused = with_cookie(&server, "POST", path, &session.cookie, &headers).await;
        assert_eq!(refused.status, 403, "{headers:?}: {}", refused.text());
        assert_eq!(mode_of(&server, "gw-1").await, WorkerMode::Active);
    }
    // The right token from another site is refused too.
    let origin = "http://evil.test";
    let cross = with_cookie(
        &server,
        "POST",
        path,
        &session.cookie,
        &[("x-csrf-token", &session.csrf), ("origin", origin)],
    )
    .await;
    assert_eq!(cross.status, 403);
    assert_eq!(mode_of(&server, "gw-1").await, WorkerMode::Active);

    let done = with_cookie(
        &server,
        "POST",
        path,
        &session.cookie,
        &[
            ("x-csrf-token", &session.csrf),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert_eq!(mode_of(&server, "gw-1").await, WorkerMode::Cordoned);
    // A bearer token needs no CSRF token: browsers never send one on their own.
    let bearer = Reply::from(
        server
            .http
            .post(server.url("/v1/admin/workers/gw-1/uncordon"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bearer.status, 200);
}

#[tokio::test]
async fn sign_out_needs_the_csrf_token_and_then_the_cookie_opens_nothing() {
    let server = TestServer::memory(Setup::default()).await;
    let session = signed_in(&server).await;
    let refused = with_cookie(&server, "DELETE", "/ui/session", &session.cookie, &[]).await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        with_cookie(&server, "GET", "/v1/admin/overview", &session.cookie, &[])
            .await
            .status,
        200
    );

    let out = with_cookie(
        &server,
        "DELETE",
        "/ui/session",
        &session.cookie,
        &[("x-csrf-token", &session.csrf)],
    )
    .await;
    assert_eq!(out.status, 204);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    for path in ["/v1/admin/overview", "/ui/session", "/v1/upstreams"] {
        assert_eq!(
            with_cookie(&server, "GET", path, &session.cookie, &[])
                .await
                .status,
            401,
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_proxy_listing_refuses_bad_input_and_pages_by_cursor() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 5).await;
    for query in [
        "limit=0",
        "limit=1001",
        "status=BOGUS",
        "after=xyz",
        "upstream=no-dash",
        "color=red",
    ] {
        let reply = server
            .get(&format!("/v1/admin/proxies?{query}"), Some(ADMIN))
            .await;
        assert_eq!(reply.status, 400, "{query}: {}", reply.text());
    }
    let mut sorted = ids.clone();
    sorted.sort();
    let first = server
        .get("/v1/admin/proxies?limit=2", Some(ADMIN))
        .await
        .json();
    assert_eq!(first["proxies"].as_array().unwrap().len(), 2);
    assert_eq!(first["next"], sorted[1].as_str());
    let rest = server
        .get(
            &format!("/v1/admin/proxies?limit=10&after={}", sorted[1]),
            Some(ADMIN),
        )
        .await
        .json();
    assert_eq!(rest["proxies"].as_array().unwrap().len(), 3);
    assert!(rest["next"].is_null());
    assert_eq!(
        server.get("/v1/admin/proxies", Some(ALICE)).await.status,
        403
    );
}

#[tokio::test]
async fn the_proxy_listing_says_why_each_last_check_failed() {
    use proxypool_core::{CheckFailure, CheckOutcome, HealthBatch, HealthObservation};
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 2).await;
    let now = now_millis();
    server
        .pool
        .apply_health(
            now,
            HealthBatch {
                observations: vec![HealthObservation {
                    proxy_id: ids[0].clone(),
                    checked_at_ms: now,
                    outcome: CheckOutcome::failure(CheckFailure::ProxyTls),
                }],
                unhealthy_after_failures: 3,
            },
        )
        .await
        .unwrap();
    let listed = server.get("/v1/admin/proxies", Some(ADMIN)).await.json();
    let reason_of = |id: &proxypool_core::ProxyId| {
        listed["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id.as_str())
            .map(|p| p["last_check_error"].clone())
            .unwrap()
    };
    assert_eq!(reason_of(&ids[0]), json!("proxy_tls"), "{listed}");
    assert_eq!(reason_of(&ids[1]), json!(null), "checked fine: {listed}");
}

#[tokio::test]
async fn a_session_ends_when_its_clients_token_rotates_or_the_client_goes() {
    let server = TestServer::memory(Setup::default()).await;
    let session = signed_in(&server).await;
    let reads = |cookie: String| {
        let server = &server;
        async move {
            let mut statuses = Vec::new();
            for path in ["/ui/session", "/v1/admin/overview"] {
                statuses.push(with_cookie(server, "GET", path, &cookie, &[]).await.status);
            }
            statuses
        }
    };
    assert_eq!(reads(session.cookie.clone()).await, [200, 200]);

    // Another client's change (alice removed, bob's token rotated) leaves the session be.
    let mut clients: Vec<_> = standard_clients()
        .into_iter()
        .filter(|c| c.id.as_str() != "alice")
        .collect();
    for client in &mut clients {
        if client.id.as_str() == "bob" {
            client.token_hash = proxypool_core::SecretHash::derive(BOB, "othersalt").unwrap();
        }
    }
    server.state.replace_clients(clients.clone()).unwrap();
    assert_eq!(reads(session.cookie.clone()).await, [200, 200]);

    // The same admin token under a new salted hash: the operator rotated the credential.
    for client in &mut clients {
        if client.id.as_str() == "ops" {
            client.token_hash =
                proxypool_core::SecretHash::derive("token-admin-rotated-0123", "newsalt").unwrap();
        }
    }
    server.state.replace_clients(clients.clone()).unwrap();
    assert_eq!(reads(session.cookie.clone()).await, [401, 401]);
    // Rotating back does not revive it: the session was ended.
    server.state.replace_clients(standard_clients()).unwrap();
    assert_eq!(reads(session.cookie.clone()).await, [401, 401]);

    // A client removed from the file takes its sessions with it.
    let session = signed_in(&server).await;
    assert_eq!(reads(session.cookie.clone()).await, [200, 200]);
    let without_ops: Vec<_> = standard_clients()
        .into_iter()
        .filter(|c| c.id.as_str() != "ops")
        .collect();
    server.state.replace_clients(without_ops).unwrap();
    assert_eq!(reads(session.cookie.clone()).await, [401, 401]);
}

#[tokio::test]
async fn every_refused_sign_in_gets_the_same_answer() {
    let mut clients = standard_clients();
    let mut fenced = crate::common::client("fenced", "platform", "token-fenced-0123456789");
    fenced.admin = true;
    fenced.ip_allowlist = proxypool_config::Cidrs::parse(&["192.0.2.0/24"]).unwrap();
    clients.push(fenced);
    let server = behind_balancer(clients).await;
    let mut bodies = Vec::new();
    for (token, address) in [
        ("token-nobody-0123456789", "203.0.113.1"),
        (ALICE, "203.0.113.2"),
        ("token-fenced-0123456789", "203.0.113.3"),
    ] {
        let reply = sign_in_with(&server, token, &from(address)).await;
        assert_eq!(reply.status, 401, "{token}: {}", reply.text());
        assert!(reply.header("set-cookie").is_none());
        bodies.push(reply.json()["error"].clone());
    }
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(bodies[0], bodies[2]);
    // From inside its allowlist the fenced admin signs in; the cookie then opens the routes
    // only from there.
    let inside = sign_in_with(&server, "token-fenced-0123456789", &from("192.0.2.9")).await;
    assert_eq!(inside.status, 201, "{}", inside.text());
    let cookie = inside
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let outside = with_cookie(
        &server,
        "GET",
        "/v1/admin/overview",
        &cookie,
        &from("203.0.113.3"),
    )
    .await;
    assert_eq!(outside.status, 403);
}

#[tokio::test]
async fn failed_sign_ins_back_off_their_address_and_no_other() {
    let server = behind_balancer(standard_clients()).await;
    let guesser = from("203.0.113.7");
    for attempt in 0..=proxypool_api::SIGN_IN_FREE_FAILURES {
        let reply = sign_in_with(&server, "token-guess-0123456789", &guesser).await;
        assert_eq!(reply.status, 401, "attempt {attempt}");
    }
    let locked = sign_in_with(&server, "token-guess-0123456789", &guesser).await;
    locked.assert_error(429, "rate_limited");
    let wait: u64 = locked.header("retry-after").unwrap().parse().unwrap();
    assert!(wait >= 1, "{wait}");
    // The right token from the locked-out address is refused too: the lockout cannot be
    // used to test a guess.
    let right = sign_in_with(&server, ADMIN, &guesser).await;
    assert_eq!(right.status, 429, "{}", right.text());
    assert!(right.header("set-cookie").is_none());
    // Another address is not affected.
    let other = sign_in_with(&server, ADMIN, &from("198.51.100.1")).await;
    assert_eq!(other.status, 201, "{}", other.text());
    let metrics = server.get("/metrics", None).await.text();
    assert!(
        metrics.contains("proxypool_api_sign_in_failures_total{reason=\"refused\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("proxypool_api_sign_in_failures_total{reason=\"locked_out\"}"));
}

#[tokio::test]
async fn the_cookie_is_secure_and_host_prefixed_only_on_an_https_origin() {
    let server = behind_balancer(standard_clients()).await;
    let plain = sign_in(&server, ADMIN).await;
    let cookie = plain.header("set-cookie").unwrap().to_owned();
    assert!(cookie.starts_with("pp_session="), "{cookie}");
    assert!(!cookie.contains("Secure"), "{cookie}");

    let https = sign_in_with(&server, ADMIN, &[("x-forwarded-proto", "https")]).await;
    let cookie = https.header("set-cookie").unwrap().to_owned();
    assert!(cookie.starts_with("__Host-pp_session="), "{cookie}");
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(
        cookie.contains("Path=/") && !cookie.contains("Domain"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let read = with_cookie(&server, "GET", "/ui/session", pair, &[]).await;
    assert_eq!(read.status, 200, "the __Host- cookie signs in");

    // From a peer that is not a trusted balancer the header means nothing.
    let untrusted = TestServer::memory(Setup::default()).await;
    let reply = sign_in_with(&untrusted, ADMIN, &[("x-forwarded-proto", "https")]).await;
    let cookie = reply.header("set-cookie").unwrap();
    assert!(
        cookie.starts_with("pp_session=") && !cookie.contains("Secure"),
        "{cookie}"
    );
}
