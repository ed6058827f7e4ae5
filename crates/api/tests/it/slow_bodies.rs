//! Slow request bodies over real sockets: senders that trickle (or never finish) a body
//! hold no global request slot, so an authenticated client on another address is still
//! served; one address is held to `max_requests_in_flight_per_ip` (429 beyond it); a body
//! not whole within `body_read_timeout` is 408 and charges nothing; the dashboard's
//! sign-in takes at most 1 KiB.

use crate::common::*;
use proxypool_api::ApiLimits;
use proxypool_config::Millis;
use proxypool_quota::Operation;
use proxypool_testkit::edge::{FLOOD_SOURCE, OTHER_SOURCE, connect_from, http_from};
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The address of the client that must still be served beside two slow ones.
const THIRD_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

/// How long any one answer, or a change the server makes on its own, may take: generous,
/// because on a loaded machine the server may take seconds to read the stalled heads.
const PATIENCE: Duration = Duration::from_secs(10);

async fn server(limits: ApiLimits) -> TestServer {
    TestServer::memory(Setup {
        limits,
        ..Setup::default()
    })
    .await
}

/// Eight global slots; `per_ip` of them per address; bodies may take `body_read_timeout`.
fn limits(per_ip: usize, body_read_timeout: Duration) -> ApiLimits {
    ApiLimits {
        max_concurrent_requests: 8,
        max_requests_in_flight_per_ip: per_ip,
        body_read_timeout: Millis(body_read_timeout.as_millis() as u64),
        ..ApiLimits::default()
    }
}

/// A request head announcing a `length`-byte JSON body (the server closes after it).
fn post_head(path: &str, token: Option<&str>, length: usize) -> String {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST {path} HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n\
         {auth}Content-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

/// Sends `head` and the first bytes of its body from `source`, and keeps the connection
/// open without sending the rest.
async fn stalled(source: IpAddr, addr: SocketAddr, head: &str) -> TcpStream {
    let mut stream = connect_from(source, addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"{\"t").await.unwrap();
    stream
}

/// `GET /v1/me` as alice from `source`: the status line and the JSON body (the server
/// closes after it).
async fn me_from(source: IpAddr, addr: SocketAddr) -> (String, Value) {
    let request = format!(
        "GET /v1/me HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {ALICE}\r\nConnection: close\r\n\r\n"
    );
    let (head, body) = http_from(source, addr, &request, PATIENCE)
        .await
        .unwrap_or_else(|e| {
            panic!("no answer from the server to {source} within {PATIENCE:?}: {e}")
        });
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (head, body)
}

/// `cap` stalled requests from `source`, each holding one of the address's `cap` slots:
/// returned once a request from it is refused with 429 while none of them was answered.
///
/// Writing a request is not its reaching the server: on a loaded machine a probe sent
/// after a stalled request may be read before it and take its slot, and the stalled one is
/// then refused. Such a one is sent again, until the address is full of stalled requests.
async fn stalled_holding_every_slot(
    source: IpAddr,
    addr: SocketAddr,
    head: &str,
    cap: usize,
) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(cap);
    for _ in 0..cap {
        held.push(stalled(source, addr, head).await);
    }
    eventually_async(
        &format!("{source} full of stalled requests"),
        PATIENCE,
        async || {
            for stream in &mut held {
                if answered(stream) {
                    *stream = stalled(source, addr, head).await;
                }
            }
            let (probe, _) = me_from(source, addr).await;
            let refused = probe.starts_with("HTTP/1.1 429");
            if !refused {
                eprintln!(
                    "{source} not refused yet: {}",
                    probe.lines().next().unwrap_or("")
                );
            }
            (refused && !held.iter().any(answered)).then_some(())
        },
    )
    .await;
    held
}

/// Whether the server has answered (or closed) a stalled request.
fn answered(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    !matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Eight stalled bodies from each of two addresses (sixteen, over the eight global slots;
/// each address within its own cap of eight); a client on a third address must still be
/// answered at once.
async fn stalled_bodies_hold_no_global_slot(heads: [String; 2]) {
    let server = server(limits(8, Duration::from_secs(30))).await;
    let mut held = Vec::new();
    for (source, head) in [FLOOD_SOURCE, OTHER_SOURCE].into_iter().zip(&heads) {
        held.extend(stalled_holding_every_slot(source, server.addr, head, 8).await);
    }

    // Served, not refused: had the stalled bodies taken global slots, this would be 503 at
    // once (or, were requests queued for a slot, no answer until the bodies time out).
    let (head, body) = me_from(THIRD_SOURCE, server.addr).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert_eq!(body["client"], "alice", "{body}");
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_sign_ins_from_two_addresses_do_not_stop_a_third() {
    let head = post_head("/ui/session", None, 600);
    stalled_bodies_hold_no_global_slot([head.clone(), head]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_extraction_bodies_do_not_stop_another_client() {
    stalled_bodies_hold_no_global_slot([
        post_head("/v1/extractions", Some(ALICE), 200),
        post_head("/v1/extractions", Some(BOB), 200),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_over_its_in_flight_cap_gets_429_and_another_is_served() {
    let server = server(limits(2, Duration::from_secs(30))).await;
    let head = post_head("/ui/session", None, 600);
    let held = stalled_holding_every_slot(FLOOD_SOURCE, server.addr, &head, 2).await;

    let (refused, body) = me_from(FLOOD_SOURCE, server.addr).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1\r\n"),
        "{refused}"
    );
    assert_eq!(
        body["error"]["code"], "too_many_requests_in_flight",
        "{body}"
    );
    assert!(body["request_id"].is_string(), "{body}");

    let (served, body) = me_from(OTHER_SOURCE, server.addr).await;
    assert!(served.starts_with("HTTP/1.1 200"), "{served}\n{body}");

    // The slots come back when the slow senders go away.
    drop(held);
    eventually_async("the address served again", PATIENCE, async || {
        let (head, _) = me_from(FLOOD_SOURCE, server.addr).await;
        head.starts_with("HTTP/1.1 200").then_some(())
    })
    .await;
}

/// An answer to a trickled body: its head, its JSON body, when it came (from just before
/// the request's head was sent) and how many bytes of the body had been sent by then.
struct Answered {
    head: String,
    body: Value,
    after: Duration,
    body_bytes_sent: usize,
}

/// Sends `head` at once and `body` one byte every `every` from [`OTHER_SOURCE`], and
/// reads the answer until the server closes or [`PATIENCE`] passes.
async fn trickled_body(addr: SocketAddr, head: &str, body: &[u8], every: Duration) -> Answered {
    let stream = connect_from(OTHER_SOURCE, addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // Before the head goes out: the server's deadline starts once it has read the head,
    // which may be before this task runs again.
    let started = Instant::now();
    writer.write_all(head.as_bytes()).await.unwrap();
    let body = body.to_vec();
    let sent = Arc::new(AtomicUsize::new(0));
    let writing = tokio::spawn({
        let sent = Arc::clone(&sent);
        async move {
            for byte in body {
                if writer.write_all(&[byte]).await.is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::SeqCst);
                // The stimulus: the pace of the trickle.
                tokio::time::sleep(every).await;
            }
            // Keep the connection open: an answer must not wait for the client to give up.
            std::future::pending::<()>().await;
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut answered = None;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                answered.get_or_insert_with(|| (started.elapsed(), sent.load(Ordering::SeqCst)));
                answer.extend_from_slice(&buf[..n]);
            }
        }
    }
    writing.abort();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        panic!("no answer within {PATIENCE:?}: {text:?}");
    };
    let (after, body_bytes_sent) = answered.unwrap();
    Answered {
        head: head.to_owned(),
        body: serde_json::from_str(body).unwrap_or(Value::Null),
        after,
        body_bytes_sent,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_not_whole_within_the_deadline_gets_408_and_charges_nothing() {
    const DEADLINE: Duration = Duration::from_millis(300);
    let server = server(limits(8, DEADLINE)).await;
    server.seed("acme", 0, 3).await;
    // Padded with whitespace (still the same JSON) so that, a byte every 100 ms, it takes
    // twenty times the deadline to arrive whole.
    let document = format!("{:<64}", json!({ "count": 1 }).to_string());
    let head = post_head("/v1/extractions", Some(ALICE), document.len());

    // Bytes keep coming, but the deadline runs from the first one asked for: the answer
    // comes while the body is still arriving.
    let answered = trickled_body(
        server.addr,
        &head,
        document.as_bytes(),
        Duration::from_millis(100),
    )
    .await;
    let (status, body) = (&answered.head, &answered.body);
    assert!(status.starts_with("HTTP/1.1 408"), "{status}\n{body}");
    assert_eq!(body["error"]["code"], "body_timeout", "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    assert!(
        answered.after >= DEADLINE,
        "answered after {:?}",
        answered.after
    );
    assert!(
        answered.body_bytes_sent < document.len(),
        "answered only once the body was whole, after {:?}",
        answered.after
    );
    assert_eq!(server.quota.buckets().await, 0, "no quota was touched");
    assert_eq!(server.unextracted("acme").await, 3);

    // The same body sent in time (at once) is served.
    let (status, body) = http_from(
        OTHER_SOURCE,
        server.addr,
        &format!("{head}{document}"),
        PATIENCE,
    )
    .await
    .unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert!(status.starts_with("HTTP/1.1 2"), "{status}\n{body}");
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1
    );
    assert_eq!(server.unextracted("acme").await, 2);
}

async fn sign_in(server: &TestServer, body: String) -> Reply {
    Reply::from(
        server
            .http
            .post(server.url("/ui/session"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn a_sign_in_over_one_kib_gets_413_and_opens_no_session() {
    let server = server(ApiLimits::default()).await;
    // A valid admin sign-in, padded past 1 KiB: refused before the token is looked at.
    let padded = format!("{{\"token\":\"{ADMIN}\"{}}}", " ".repeat(1024));
    let refused = sign_in(&server, padded).await;
    let message = refused.assert_error(413, "payload_too_large");
    assert!(message.contains("1024"), "{message}");
    assert!(refused.header("set-cookie").is_none());

    // Streamed without a length, the cap holds while reading.
    let chunked = format!(
        "POST /ui/session HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n800\r\n{}\r\n0\r\n\r\n",
        " ".repeat(0x800)
    );
    let (head, body) = http_from(OTHER_SOURCE, server.addr, &chunked, Duration::from_secs(3))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("set-cookie"), "{head}");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");

    // The longest token the sign-in takes still fits (and is named, not cut off).
    let longest = sign_in(&server, json!({ "token": "x".repeat(512) }).to_string()).await;
    longest.assert_error(401, "unauthenticated");
    let overlong = sign_in(&server, json!({ "token": "x".repeat(513) }).to_string()).await;
    overlong.assert_error(400, "invalid_request");

    let signed = sign_in(&server, json!({ "token": ADMIN }).to_string()).await;
    assert_eq!(signed.status, 201, "{}", signed.text());
    assert!(signed.header("set-cookie").is_some());
}
