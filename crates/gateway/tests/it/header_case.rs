//! Header names keep their case and their order through plain-HTTP forwarding, both
//! ways: sites fingerprint a client by how it spells and orders its headers, so the
//! gateway must not lower-case or reshuffle them.
//!
//! The far end is a raw recorder that keeps the request head byte for byte and answers
//! with a head of its own spelling. It stands once for an HTTP upstream proxy (the gateway
//! sends it the absolute-form request, so it sees exactly what the gateway wrote) and once
//! for an origin behind microsocks (a SOCKS5 tunnel passes bytes unchanged).

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, Upstream};
use crate::common::*;
use proxypool_core::Protocol;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The response head the recorder sends: odd spellings, in an order no map would choose.
/// (A repeated name is written next to its first use: one name's values stay together.)
const RESPONSE_HEAD: &str = "HTTP/1.1 200 OK\r\n\
     X-Zeta-Last: z\r\n\
     content-TYPE: text/plain\r\n\
     X-alpha-FIRST: a\r\n\
     Set-Cookie: one=1\r\n\
     Set-Cookie: two=2\r\n\
     ETag: \"v1\"\r\n\
     Content-Length: 2\r\n\r\n";

/// Header lines the client sends on top of curl's own, in this order.
const CLIENT_HEADERS: [&str; 5] = [
    "X-Zeta-Last: z",
    "accept-LANGUAGE: en",
    "X-alpha-FIRST: a",
    "DNT: 1",
    "sec-CH-ua: \"x\"",
];

/// A listener that records each request head it reads and answers [`RESPONSE_HEAD`].
struct Recorder {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    // One request per connection is enough: each answer closes it.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    recorded
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&head).into_owned());
                    let answer = RESPONSE_HEAD.replace(
                        "Content-Length: 2\r\n",
                        "Content-Length: 2\r\nConnection: close\r\n",
                    );
                    let _ = stream.write_all(format!("{answer}ok").as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { addr, heads }
    }

    fn last_head(&self) -> String {
        self.heads
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a request arrived")
    }
}

/// The header lines of a head, as written (the request or status line left out).
fn header_lines(head: &str) -> Vec<String> {
    head.split("\r\n")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `wanted`'s lines, each present verbatim in `lines` and in the same relative order.
fn assert_in_order(lines: &[String], wanted: &[&str], side: &str) {
    let positions: Vec<Option<usize>> = wanted
        .iter()
        .map(|want| lines.iter().position(|line| line == want))
        .collect();
    assert!(
        positions.iter().all(Option::is_some),
        "{side}: every line arrives spelled as sent; wanted {wanted:?}, got {lines:#?}"
    );
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "{side}: the lines keep their order; wanted {wanted:?}, got {lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_name_case_and_order_survive_the_gateway_both_ways() {
    let as_http_upstream = Recorder::start().await;
    let as_origin = Recorder::start().await;
    let microsocks = Upstream::socks5(Ipv4Addr::new(127, 0, 0, 87)).await;
    let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(
        vec![
            proxy(1, Protocol::Http, as_http_upstream.addr, None, "raw", "us"),
            proxy(
                2,
                Protocol::Socks5,
                microsocks.addr,
                credentials,
                "micro",
                "de",
            ),
        ],
        vec![client("alice")],
    );
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    let expected_response: Vec<String> = header_lines(RESPONSE_HEAD);
    let expected_response: Vec<&str> = expected_response
        .iter()
        .map(String::as_str)
        .filter(|line| !line.starts_with("Content-Length"))
        .collect();
    for (user, recorder) in [
        ("alice-upstream-raw", &as_http_upstream),
        ("alice-upstream-micro", &as_origin),
    ] {
        let proxy_url = http_proxy_url(user, gateway.http);
        let target = format!("http://127.0.0.1:{}/page", as_origin.addr.port());
        let mut args = vec!["-x", proxy_url.as_str()];
        for line in CLIENT_HEADERS {
            args.extend(["-H", line]);
        }
        args.push(&target);
        let (exit, raw) = curl_all_headers(&args).await;
        assert_eq!(exit, 0, "{user}: curl: {raw}");
        let sent = header_lines(&recorder.last_head());
        assert_in_order(&sent, &CLIENT_HEADERS, &format!("{user}, toward the site"));
        assert!(
            !sent
                .iter()
                .any(|line| line.to_ascii_lowercase().starts_with("proxy-connection")),
            "{user}: hop-by-hop headers still go: {sent:#?}"
        );
        let received = header_lines(&raw);
        assert_in_order(
            &received,
            &expected_response,
            &format!("{user}, toward the client"),
        );
    }
    gateway.shutdown().await;
}
