//! Vendor lists over https and the entry rules: a list served with a certificate of the
//! configured CA is fetched, one from another CA fails as `tls` on the status; an entry
//! that would get the upstream's credentials on a host outside `allowed_hosts`, or on an
//! internal address, is refused, counted, and never stored with the credentials. The
//! fetch itself: a gzip list is decompressed under the size cap, redirects are followed
//! only on the list's own host and only a bounded number of times, and a page walk whose
//! next link leads back to a page already read fails as `page_loop`.

use crate::common::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use proxypool_controller::provider::{FetchError, Reconciler, StatusBoard, VendorClient};
use proxypool_controller::{Clock, ManualClock};
use proxypool_core::{DueQuery, HealthStore, ProxyRecord, UpstreamId};
use proxypool_edge::{ServeLimits, ServerTls, ServerTlsFiles};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_testkit::TestCa;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// A vendor list endpoint answering `body` at any path, over TLS when given.
async fn list_endpoint(body: &'static str, tls: Option<ServerTls>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = hyper::service::service_fn(move |_: Request<Incoming>| async move {
        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(
            body.as_bytes(),
        ))))
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    let limits = ServeLimits {
        tls,
        ..ServeLimits::default()
    };
    tokio::spawn(proxypool_edge::serve(
        listener,
        service,
        limits,
        std::future::pending(),
    ));
    format!("{scheme}://127.0.0.1:{}/list", addr.port())
}

struct Rig {
    pool: Arc<MemoryPool>,
    clock: Arc<ManualClock>,
    board: Arc<StatusBoard>,
    reconciler: Reconciler,
}

/// A reconciler of the list at `url` whose fetch may reach this machine (the test's vendor
/// is on loopback) whatever `allow_private_hosts` says, so the entry rules can be tested
/// with it unset; [`production_rig`] has the client the controller builds.
fn rig(url: &str, provider_extra: &str, upstream_extra: &str) -> Rig {
    rig_with(url, provider_extra, upstream_extra, |upstream| {
        VendorClient::for_upstream(upstream).allowing_private_hosts(true)
    })
}

/// A reconciler with the fetch client the controller builds for the upstream.
fn production_rig(url: &str, provider_extra: &str) -> Rig {
    rig_with(url, provider_extra, "", VendorClient::for_upstream)
}

fn rig_with(
    url: &str,
    provider_extra: &str,
    upstream_extra: &str,
    client: impl Fn(&proxypool_controller::config::UpstreamConfig) -> VendorClient,
) -> Rig {
    let text = config_text(&format!(
        r#"
[[upstreams]]
id = "acme"
ttl = "5m"
max_size = 1000
{upstream_extra}
[upstreams.provider]
kind = "http"
url = "{url}"
format = "text"
timeout = "2s"
{provider_extra}
[[upstreams.health.targets]]
url = "http://127.0.0.1:9/"
"#
    ));
    let config = parse_config(&text);
    let upstream = config.upstreams[0].clone();
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    let clock = ManualClock::new(proxypool_core::now_millis());
    let board = Arc::new(StatusBoard::default());
    let reconciler = Reconciler::new(
        Arc::new(upstream.clone()),
        pool.clone(),
        clock.clone(),
        client(&upstream),
        board.clone(),
    );
    Rig {
        pool,
        clock,
        board,
        reconciler,
    }
}

async fn records(rig: &Rig) -> Vec<ProxyRecord> {
    rig.pool
        .due_for_check(
            rig.clock.now(),
            DueQuery {
                limit: 10_000,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap()
}

fn acme() -> UpstreamId {
    UpstreamId::new("acme").unwrap()
}

fn tls_of(ca: &TestCa) -> ServerTls {
    let files = ca.server("vendor").unwrap();
    ServerTls::load(ServerTlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: None,
    })
    .unwrap()
}

const PUBLIC_LIST: &str = "198.51.100.7:3128:own-user:own-pass\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_over_https_from_the_configured_ca_is_fetched() {
    let ca = TestCa::new("vendor ca").unwrap();
    let url = list_endpoint(PUBLIC_LIST, Some(tls_of(&ca))).await;
    let extra = format!(
        "[upstreams.provider.tls]\nca = \"{}\"\n",
        ca.ca_path().display()
    );
    let rig = rig(&url, &extra, "");
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.report.inserted), (1, 1));
    assert_eq!(records(&rig).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vendor_certificate_from_another_ca_fails_the_fetch_as_tls() {
    let ca = TestCa::new("vendor ca").unwrap();
    let other = TestCa::new("not the vendor's").unwrap();
    let url = list_endpoint(PUBLIC_LIST, Some(tls_of(&ca))).await;
    let extra = format!(
        "[upstreams.provider.tls]\nca = \"{}\"\n",
        other.ca_path().display()
    );
    let rig = rig(&url, &extra, "");
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert_eq!(error.kind(), "tls", "{error}");
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    let status = rig.board.get(&acme()).unwrap();
    assert_eq!(status.last_error.as_deref(), Some("tls"));
    assert!(records(&rig).await.is_empty());
}

/// A rig whose upstream has the vendor account's credentials (from a file named
/// `file_prefix` plus the process id) and allows `vendor.example` and 203.0.113.0/24.
fn vendor_account_rig(url: &str, file_prefix: &str) -> Rig {
    let password = std::env::temp_dir().join(format!("{file_prefix}{}", std::process::id()));
    std::fs::write(&password, "vendor-account-password").unwrap();
    let credentials = format!(
        "[upstreams.credentials]\nusername = \"acme-account\"\npassword = {{ file = \"{}\" }}\n",
        password.display()
    );
    rig(
        url,
        "allow_plaintext = true\nallowed_hosts = [\"vendor.example\", \"203.0.113.0/24\"]\n",
        &credentials,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_outside_the_allowed_hosts_or_on_internal_addresses_are_refused() {
    // One list, as an attacker on the path might have rewritten it.
    let list = "203.0.113.5:3128\n\
                gw1.vendor.example:3128\n\
                attacker.example:3128\n\
                198.51.100.7:3128:own-user:own-pass\n\
                127.0.0.1:3128:own-user:own-pass\n\
                10.0.0.1:3128\n";
    let url = list_endpoint(list, None).await;
    let rig = vendor_account_rig(&url, "vendor-pw-");
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.fetched, 6);
    assert_eq!(outcome.refused, 3);
    let stored = records(&rig).await;
    let mut hosts: Vec<&str> = stored.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, ["198.51.100.7", "203.0.113.5", "gw1.vendor.example"]);
    for record in &stored {
        let username = &record.credentials.as_ref().unwrap().username;
        let expected = if record.host == "198.51.100.7" {
            "own-user"
        } else {
            "acme-account"
        };
        assert_eq!(username, expected, "{}", record.host);
    }
    let status = rig.board.get(&acme()).unwrap();
    assert_eq!((status.last_refused, status.total_refused), (3, 3));
    assert_eq!(status.last_dropped.get("host_not_allowed"), Some(&1));
    assert_eq!(status.last_dropped.get("private_host"), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_host_forms_are_judged_and_stored_as_the_address_they_denote() {
    // 127.0.0.1 four ways (with credentials of their own: refused as internal all the
    // same), 169.254.169.254 and 10.0.0.1 as numbers, 198.51.100.7 as a number (outside
    // the allowed block) and 203.0.113.5 as a number (inside it).
    let list = "2130706433:3128:own-user:own-pass\n\
                0x7f000001:3128:own-user:own-pass\n\
                0177.0.0.1:3128:own-user:own-pass\n\
                127.1:3128:own-user:own-pass\n\
                2852039166:80\n\
                167772161:3128\n\
                3325256711:3128\n\
                3405803781:3128\n";
    let url = list_endpoint(list, None).await;
    let rig = vendor_account_rig(&url, "vendor-pw-num-");
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.fetched, 8);
    assert_eq!(outcome.refused, 7);
    let stored = records(&rig).await;
    let hosts: Vec<&str> = stored.iter().map(|r| r.host.as_str()).collect();
    // Stored (and so dialed by the checker) as the address that was checked.
    assert_eq!(hosts, ["203.0.113.5"]);
    let status = rig.board.get(&acme()).unwrap();
    assert_eq!(status.last_dropped.get("private_host"), Some(&6));
    assert_eq!(status.last_dropped.get("host_not_allowed"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_inside_is_refused_before_it_is_stored() {
    let Some(name) = internal_hostname().await else {
        return;
    };
    // Its own credentials, so only what the name resolves to can refuse it.
    let list: &'static str =
        Box::leak(format!("{name}:3128:own-user:own-pass\n203.0.113.5:3128\n").into_boxed_str());
    let url = list_endpoint(list, None).await;
    let rig = vendor_account_rig(&url, "vendor-pw-name-");
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.refused), (2, 1));
    let stored = records(&rig).await;
    let hosts: Vec<&str> = stored.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(hosts, ["203.0.113.5"], "{name} leads inside: not stored");
    let status = rig.board.get(&acme()).unwrap();
    assert_eq!(status.last_dropped.get("private_host"), Some(&1));
}

/// A long, very compressible list (the gzip test's body).
fn long_list() -> String {
    (0..300)
        .map(|i| format!("203.0.113.{}:8080\n", i % 250 + 1))
        .collect()
}

/// [`long_list`] as `gzip` wrote it (`gzip -n`: no name, no time), 570 bytes for 5533.
const LONG_LIST_GZ: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/long_list.txt.gz"
));

/// A raw HTTP/1.1 server on `ip`: each request's path goes to `answer`, whose bytes are
/// written back whole before the connection is closed; returns the port and every request
/// head it read.
async fn raw_server(
    ip: &str,
    answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (answer, log) = (Arc::clone(&answer), Arc::clone(&log));
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                log.lock().unwrap().push(head);
                let _ = socket.write_all(&answer(&path)).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, seen)
}

fn response(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

async fn fetch(url: &str, secret: Option<&str>, max_bytes: usize) -> Result<Bytes, FetchError> {
    let secret = secret.map(|s| proxypool_core::Secret::new(s.to_owned()));
    VendorClient::new()
        .allowing_private_hosts(true)
        .fetch(url, secret.as_ref(), Duration::from_secs(5), max_bytes)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_list_is_decompressed_and_capped_by_its_decompressed_size() {
    let (port, seen) = raw_server("127.0.0.1", |_| {
        response("200 OK", "content-encoding: gzip\r\n", LONG_LIST_GZ)
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/list");
    let body = fetch(&url, None, 64 * 1024).await.unwrap();
    assert_eq!(body, long_list().as_bytes());
    assert!(
        seen.lock().unwrap()[0]
            .to_ascii_lowercase()
            .contains("accept-encoding: gzip"),
        "the fetch asks for gzip"
    );
    // 570 bytes on the wire, 5533 once decompressed: the cap is on what the list is.
    assert_eq!(fetch(&url, None, 1_000).await, Err(FetchError::TooLarge));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_on_the_list_host_are_followed_a_bounded_number_of_times() {
    // `/hop/N` redirects to `/hop/N-1`; `/hop/0` is the list.
    let (port, seen) = raw_server("127.0.0.1", |path| {
        match path
            .strip_prefix("/hop/")
            .and_then(|n| n.parse::<u32>().ok())
        {
            Some(0) => response("200 OK", "", PUBLIC_LIST.as_bytes()),
            Some(n) => response("302 Found", &format!("location: /hop/{}\r\n", n - 1), b""),
            None => response("404 Not Found", "", b""),
        }
    })
    .await;
    let hops = proxypool_controller::provider::fetch::MAX_REDIRECTS;
    let url = format!("http://127.0.0.1:{port}/hop/{hops}");
    let body = fetch(&url, Some("Bearer vendor-key"), 1024).await.unwrap();
    assert_eq!(body, PUBLIC_LIST.as_bytes());
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), hops + 1);
        // The list's own host keeps the credentials through the redirects.
        assert!(seen.iter().all(|head| head.contains("Bearer vendor-key")));
    }
    let url = format!("http://127.0.0.1:{port}/hop/{}", hops + 1);
    assert_eq!(
        fetch(&url, None, 1024).await,
        Err(FetchError::TooManyRedirects)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_is_not_followed() {
    let (foreign, reached) = raw_server("127.0.0.2", |_| {
        response("200 OK", "", PUBLIC_LIST.as_bytes())
    })
    .await;
    let (port, _) = raw_server("127.0.0.1", move |_| {
        response(
            "302 Found",
            &format!("location: http://127.0.0.2:{foreign}/list\r\n"),
            b"",
        )
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/list");
    assert_eq!(
        fetch(&url, Some("Bearer vendor-key"), 1024).await,
        Err(FetchError::ForeignHost(format!("127.0.0.2:{foreign}")))
    );
    assert!(
        reached.lock().unwrap().is_empty(),
        "never sent to the other host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_from_https_down_to_http_is_not_followed() {
    let (plain, reached) = raw_server("127.0.0.1", |_| {
        response("200 OK", "", PUBLIC_LIST.as_bytes())
    })
    .await;
    // The same host over https, redirecting to its plain-text twin.
    let ca = TestCa::new("vendor ca").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let location = format!("http://127.0.0.1:{plain}/list");
    let service = hyper::service::service_fn(move |_: Request<Incoming>| {
        let redirect = Response::builder()
            .status(302)
            .header("location", location.as_str())
            .body(Full::new(Bytes::new()))
            .unwrap();
        async move { Ok::<_, std::convert::Infallible>(redirect) }
    });
    let limits = ServeLimits {
        tls: Some(tls_of(&ca)),
        ..ServeLimits::default()
    };
    tokio::spawn(proxypool_edge::serve(
        listener,
        service,
        limits,
        std::future::pending(),
    ));
    let files = proxypool_edge::ClientTlsFiles {
        ca: Some(ca.ca_path().to_owned()),
        ..Default::default()
    };
    let client = VendorClient::with_tls(proxypool_edge::ClientTls::load(&files).unwrap())
        .allowing_private_hosts(true);
    let url = format!("https://127.0.0.1:{port}/list");
    let fetched = client.fetch(&url, None, Duration::from_secs(5), 1024).await;
    assert_eq!(fetched, Err(FetchError::InsecureRedirect));
    assert!(
        reached.lock().unwrap().is_empty(),
        "never sent in plain text"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_link_back_to_a_page_already_read_fails_the_round_as_a_loop() {
    // `/a` links to `/b`, which links back to `/a`.
    let (port, seen) = raw_server("127.0.0.1", |path| {
        let next = if path == "/a" { "/b" } else { "/a" };
        response(
            "200 OK",
            &format!("link: <{next}>; rel=\"next\"\r\n"),
            PUBLIC_LIST.as_bytes(),
        )
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/a");
    let rig = rig(
        &url,
        "allow_plaintext = true\n[upstreams.provider.pagination]\nstyle = \"link_header\"\n",
        "",
    );
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert_eq!(error.kind(), "page_loop", "{error}");
    assert_eq!(seen.lock().unwrap().len(), 2, "each page read once");
    assert!(records(&rig).await.is_empty());
    let status = rig.board.get(&acme()).unwrap();
    assert_eq!(status.last_error.as_deref(), Some("page_loop"));
}

/// The vendor account's token, in a file of its own, as a header the fetch sends.
fn token_header(token: &str) -> String {
    let path = std::env::temp_dir().join(format!(
        "proxypool-list-token-{}-{}",
        std::process::id(),
        token.len()
    ));
    std::fs::write(&path, token).unwrap();
    format!(
        "[upstreams.provider.auth.header]\nname = \"Authorization\"\nscheme = \"Bearer\"\nvalue = {{ file = \"{}\" }}\n",
        path.display()
    )
}

/// A list URL whose host is, or resolves to, this machine, with `allow_private_hosts`
/// unset: the round fails as `private_host` (on the board and in the stored status, which
/// `GET /v1/upstreams` shows) before anything is sent, the vendor's token included. With
/// `allow_private_hosts` the same list is fetched, so it was the rule that held it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_host_that_is_or_resolves_to_an_internal_address_is_refused_before_sending() {
    use proxypool_core::AdminStore;
    let (port, seen) = raw_server("127.0.0.1", |_| {
        response("200 OK", "", PUBLIC_LIST.as_bytes())
    })
    .await;
    let auth = token_header("vendor-list-token");
    for (host, named) in [
        ("localhost", "localhost ("),
        ("127.0.0.1", "127.0.0.1"),
        // The numeric and the IPv4-mapped IPv6 forms of the same address.
        ("2130706433", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
    ] {
        let url = format!("http://{host}:{port}/list");
        let rig = production_rig(&url, &format!("allow_plaintext = true\n{auth}"));
        let error = rig.reconciler.reconcile_once().await.unwrap_err();
        assert_eq!(error.kind(), "private_host", "{url}: {error}");
        let message = error.to_string();
        assert!(message.contains(named), "{url}: {message}");
        assert!(message.contains("allow_private_hosts"), "{message}");
        assert!(!message.contains("vendor-list-token"), "{message}");
        let status = rig.board.get(&acme()).unwrap();
        assert_eq!(status.last_error.as_deref(), Some("private_host"));
        let stored = rig.pool.provider_statuses().await.unwrap();
        assert_eq!(stored[0].last_error.as_deref(), Some("private_host"));
        assert!(records(&rig).await.is_empty());
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the listener"
    );

    let url = format!("http://localhost:{port}/list");
    let allowed = production_rig(
        &url,
        &format!("allow_plaintext = true\nallow_private_hosts = true\n{auth}"),
    );
    let outcome = allowed.reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.fetched, 1);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].contains("Bearer vendor-list-token"), "{}", seen[0]);
}
