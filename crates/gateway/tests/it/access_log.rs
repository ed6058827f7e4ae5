//! The access log end to end: every kind of request (plain HTTP, `CONNECT`, SOCKS5) and
//! every kind of refusal yields exactly one JSON line with the request's fields, sampling
//! thins served requests but never refusals, a reload reopens the file (what logrotate's
//! SIGHUP does), and the request and tunnel duration histograms count with the log off.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, echo_server, sim_upstream};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_proto::TargetAddr;
use proxypool_sim::{Origin, ProxyKind};
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// A private directory for one test's log files, removed at the end.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("gw-access-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

/// Sends `payload` through an open tunnel, reads it back and closes the tunnel.
pub(crate) async fn echo_through(mut tunnel: TcpStream, payload: &[u8]) {
    tunnel.write_all(payload).await.unwrap();
    let mut back = vec![0u8; payload.len()];
    tunnel.read_exact(&mut back).await.unwrap();
    assert_eq!(back, payload);
    tunnel.shutdown().await.unwrap();
    // The gateway closes its side once the echo server saw the end.
    let mut rest = Vec::new();
    let _ = tunnel.read_to_end(&mut rest).await;
}

async fn start(
    configure: impl FnOnce(&mut proxypool_gateway::GatewayConfig),
) -> (
    Arc<TestController>,
    Running,
    Origin,
    proxypool_sim::UpstreamProxy,
) {
    let origin = Origin::start().await.unwrap();
    let upstream = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 2)).await;
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(
        vec![proxy(
            1,
            Protocol::Http,
            upstream.addr(),
            CREDS,
            "acme",
            "us",
        )],
        vec![client("alice")],
    );
    let mut config = config(&controller);
    configure(&mut config);
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;
    (controller, gateway, origin, upstream)
}

/// The one line whose fields match every `(key, value)` of `wanted`.
fn the_line<'a>(lines: &'a [Value], wanted: &[(&str, Value)]) -> &'a Value {
    let matching: Vec<&Value> = lines
        .iter()
        .filter(|line| wanted.iter().all(|(key, value)| &line[*key] == value))
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "exactly one line with {wanted:?} among {lines:#?}"
    );
    matching[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_kind_and_refusal_yields_exactly_one_line_with_its_fields() {
    let scratch = Scratch::new("kinds");
    let path = scratch.0.join("access.log");
    let file = path.clone();
    let (_controller, gateway, origin, _upstream) = start(move |config| {
        config.access_log.enabled = true;
        config.access_log.file = Some(file);
    })
    .await;
    let echo = echo_server().await;
    let proxy_id = format!("{:032x}", 1);

    // Plain HTTP: a GET, and a POST with a body.
    let get = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(get.status, 200, "{get:?}");
    assert_eq!(get.header("x-proxypool-proxy"), Some(proxy_id.as_str()));
    let post = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        "--data-binary",
        "hello",
        &origin.url("/form?token=secret"),
    ])
    .await;
    assert_eq!(post.status, 200, "{post:?}");
    // Tunnels: CONNECT and SOCKS5 to an echo server.
    let stream = TcpStream::connect(gateway.http).await.unwrap();
    echo_through(connect_as_alice(stream, echo).await, b"0123456789").await;
    let stream = TcpStream::connect(gateway.socks5).await.unwrap();
    echo_through(socks_as_alice(stream, echo).await, b"abcdefg").await;
    // Refusals: bad credentials and a denied destination, on each listener.
    let bad_password = curl(&[
        "-x",
        &format!("http://alice:wrong@{}", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(bad_password.status, 407);
    let mut stream = TcpStream::connect(gateway.http).await.unwrap();
    let denied = proxypool_proto::http_connect::connect(
        &mut stream,
        "10.0.0.1:80",
        Some(("alice", PASSWORD)),
    )
    .await;
    assert!(denied.is_err(), "a private address is refused");
    drop(stream);
    let mut stream = TcpStream::connect(gateway.socks5).await.unwrap();
    let target = TargetAddr::from(echo);
    let wrong = proxypool_proto::socks5::connect(&mut stream, &target, Some(("alice", "wrong")));
    assert!(wrong.await.is_err(), "a wrong SOCKS5 password is refused");
    drop(stream);
    let private: SocketAddr = "10.0.0.1:80".parse().unwrap();
    assert_eq!(
        socks_reply(&gateway, "alice", private).await,
        proxypool_proto::socks5::Reply::NotAllowed
    );

    // Tunnel lines come when the tunnels end, a moment after the client closed.
    eventually(Duration::from_secs(5), "eight access-log lines", || {
        lines_of(&path).len() >= 8
    })
    .await;
    gateway.shutdown().await;
    let lines = lines_of(&path);
    assert_eq!(lines.len(), 8, "one line per request: {lines:#?}");
    for line in &lines {
        assert_eq!(line.as_object().unwrap().len(), 16, "every key: {line}");
        assert!(line["source"].as_str().unwrap().starts_with("127.0.0.1:"));
        assert!(line["duration_ms"].as_f64().unwrap() >= 0.0, "{line}");
        assert!(line["time"].as_str().unwrap().ends_with('Z'), "{line}");
    }
    let origin_target = Value::from(origin.addr().to_string());
    let served = |kind: &str| {
        vec![
            ("kind", Value::from(kind)),
            ("client", Value::from("alice")),
            ("upstream", Value::from("acme")),
            ("proxy", Value::from(proxy_id.as_str())),
            ("attempts", Value::from(1)),
            ("code", Value::Null),
        ]
    };
    let mut wanted = served("http");
    wanted.extend([
        ("method", Value::from("GET")),
        ("target", origin_target.clone()),
        ("path", Value::from("/")),
        ("status", Value::from(200)),
        ("bytes_up", Value::from(0)),
        ("bytes_down", Value::from(get.body.len())),
    ]);
    the_line(&lines, &wanted);
    let mut wanted = served("http");
    wanted.extend([
        ("method", Value::from("POST")),
        // Never the query: tokens travel there.
        ("path", Value::from("/form")),
        ("bytes_up", Value::from(5)),
        ("bytes_down", Value::from(post.body.len())),
    ]);
    the_line(&lines, &wanted);
    let mut wanted = served("connect");
    wanted.extend([
        ("method", Value::from("CONNECT")),
        ("target", Value::from(echo.to_string())),
        ("path", Value::Null),
        ("status", Value::from(200)),
        ("bytes_up", Value::from(10)),
        ("bytes_down", Value::from(10)),
    ]);
    the_line(&lines, &wanted);
    let mut wanted = served("socks5");
    wanted.extend([
        ("method", Value::Null),
        ("target", Value::from(echo.to_string())),
        ("status", Value::Null),
        ("socks_reply", Value::from(0)),
        ("bytes_up", Value::from(7)),
        ("bytes_down", Value::from(7)),
    ]);
    the_line(&lines, &wanted);
    // Refusals name their code and what the client got, and no proxy.
    let refused = |kind: &str, code: &str| {
        vec![
            ("kind", Value::from(kind)),
            ("code", Value::from(code)),
            ("proxy", Value::Null),
            ("upstream", Value::Null),
            ("bytes_up", Value::from(0)),
            ("bytes_down", Value::from(0)),
        ]
    };
    let mut wanted = refused("http", "auth_required");
    wanted.extend([("status", Value::from(407)), ("client", Value::Null)]);
    the_line(&lines, &wanted);
    let mut wanted = refused("connect", "destination_denied");
    wanted.extend([
        ("status", Value::from(403)),
        ("client", Value::from("alice")),
        ("target", Value::from("10.0.0.1:80")),
    ]);
    the_line(&lines, &wanted);
    let mut wanted = refused("socks5", "auth_required");
    // The credentials step has no reply code, and the request was never read.
    wanted.extend([("socks_reply", Value::Null), ("target", Value::Null)]);
    the_line(&lines, &wanted);
    let mut wanted = refused("socks5", "destination_denied");
    wanted.extend([
        ("socks_reply", Value::from(2)),
        ("client", Value::from("alice")),
    ]);
    the_line(&lines, &wanted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_thins_served_requests_only_and_a_reload_reopens_the_file() {
    let scratch = Scratch::new("sampling");
    let path = scratch.0.join("access.log");
    let file = path.clone();
    let (controller, gateway, origin, _upstream) = start(move |config| {
        config.access_log.enabled = true;
        config.access_log.file = Some(file);
        config.access_log.sample_one_in = 3;
    })
    .await;
    let via = http_proxy_url("alice", gateway.http);
    for _ in 0..6 {
        assert_eq!(curl(&["-x", &via, &origin.url("/")]).await.status, 200);
    }
    let wrong = format!("http://alice:wrong@{}", gateway.http);
    for _ in 0..2 {
        assert_eq!(curl(&["-x", &wrong, &origin.url("/")]).await.status, 407);
    }
    eventually(Duration::from_secs(5), "four lines", || {
        lines_of(&path).len() >= 4
    })
    .await;
    let lines = lines_of(&path);
    let count = |code: Value| lines.iter().filter(|l| l["code"] == code).count();
    assert_eq!(
        count(Value::Null),
        2,
        "one in three of six served: {lines:#?}"
    );
    assert_eq!(count(Value::from("auth_required")), 2, "every refusal");

    // logrotate moves the file away, then SIGHUP reloads: the next line starts a new file.
    let rotated = scratch.0.join("access.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    let mut reloaded = config(&controller);
    reloaded.access_log.enabled = true;
    reloaded.access_log.file = Some(path.clone());
    reloaded.access_log.sample_one_in = 3;
    gateway.reload.apply(&reloaded).unwrap();
    assert_eq!(curl(&["-x", &wrong, &origin.url("/")]).await.status, 407);
    eventually(Duration::from_secs(5), "a line in the new file", || {
        lines_of(&path).len() == 1
    })
    .await;
    assert_eq!(
        lines_of(&rotated).len(),
        4,
        "the rotated file got nothing more"
    );

    // A file that cannot be opened fails the reload, and the log stays where it was.
    reloaded.access_log.file = Some(scratch.0.join("missing-dir").join("access.log"));
    let error = gateway.reload.apply(&reloaded).unwrap_err();
    assert!(error.0.contains("missing-dir"), "{error}");
    assert_eq!(curl(&["-x", &wrong, &origin.url("/")]).await.status, 407);
    eventually(
        Duration::from_secs(5),
        "the next line in the same file",
        || lines_of(&path).len() == 2,
    )
    .await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_and_tunnel_durations_are_counted_by_kind_with_the_log_off() {
    let _alone = alone().await;
    let (_controller, gateway, origin, _upstream) = start(|_| {}).await;
    let series =
        |name: &str, kind: &str| format!("proxypool_gateway_{name}_count{{kind=\"{kind}\"}}");
    let before = |name: &'static str, kind: &'static str| {
        let gateway = &gateway;
        let series = series(name, kind);
        async move { metric(gateway, &series).await.unwrap_or(0.0) }
    };
    let http_before = before("request_duration_seconds", "http").await;
    let connect_before = before("request_duration_seconds", "connect").await;
    let tunnels_before = before("tunnel_duration_seconds", "connect").await;
    let socks_before = before("request_duration_seconds", "socks5").await;

    assert_eq!(
        curl(&[
            "-x",
            &http_proxy_url("alice", gateway.http),
            &origin.url("/")
        ])
        .await
        .status,
        200
    );
    let echo = echo_server().await;
    let stream = TcpStream::connect(gateway.http).await.unwrap();
    echo_through(connect_as_alice(stream, echo).await, b"ping").await;
    let private: SocketAddr = "10.0.0.1:80".parse().unwrap();
    socks_reply(&gateway, "alice", private).await;

    // The tunnel is counted when it ends, a moment after the client closed.
    let tunnels = eventually_async(
        "the tunnel's life counted",
        Duration::from_secs(5),
        async || {
            let now = before("tunnel_duration_seconds", "connect").await;
            (now > tunnels_before).then_some(now)
        },
    )
    .await;
    assert_eq!(tunnels, tunnels_before + 1.0, "the tunnel's life");
    assert_eq!(
        before("request_duration_seconds", "http").await,
        http_before + 1.0
    );
    assert_eq!(
        before("request_duration_seconds", "connect").await,
        connect_before + 1.0
    );
    assert_eq!(
        before("request_duration_seconds", "socks5").await,
        socks_before + 1.0,
        "a refusal is a request too"
    );
    let text = curl(&[&format!("http://{}/metrics", gateway.admin)])
        .await
        .body;
    assert!(
        text.contains(
            "proxypool_gateway_tunnel_duration_seconds_bucket{kind=\"connect\",le=\"3600\"}"
        ),
        "the tunnel histogram has its own buckets"
    );
    gateway.shutdown().await;
}
