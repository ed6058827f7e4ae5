//! The dashboard's sign-in and the admin read routes it polls: the session cookie's
//! attributes, cookie authentication on the JSON routes, CSRF and same-site checks on every
//! write made with the cookie, sign-out, and the bounded proxy listing's input checks.

mod common;

use common::*;
use proxypool_core::{WorkerId, WorkerMode, now_millis};
use serde_json::json;

struct Signed {
    cookie: String,
    csrf: String,
}

async fn sign_in(server: &TestServer, token: &str) -> Reply {
    Reply::from(
        server
            .http
            .post(server.url("/ui/session"))
            .header("content-type", "application/json")
            .body(json!({ "token": token }).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
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
    assert_eq!(client.status, 403, "{}", client.text());
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
