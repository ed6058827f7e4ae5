//! The global cap's eviction under attack, over real sockets: while idle connections from
//! eight other addresses fill the cap (each under its per-address cap), a legitimate client
//! in the middle of a TLS handshake (its ClientHello sent, the server's flight read) or with
//! half a request head sent is never the one closed to make room, and completes. A
//! kept-alive connection that has begun its next head is not closed for a newcomer either
//! (the newcomer is refused while every other connection is busy), and once it sits idle
//! again with nothing of a head read, it is the one that makes room.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use proxypool_edge::{ServeLimits, ServerTls, ServerTlsFiles, serve};
use proxypool_testkit::TestCa;
use proxypool_testkit::edge::{OTHER_SOURCE, connect_from};
use proxypool_testkit::eventually_async;
use proxypool_testkit::flood::{ipv4_source, spread_idle_flood};
use proxypool_testkit::server_side::{server_closed, server_has_read};
use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

const CAP: usize = 8;
const PER_IP: usize = 2;
/// Eight addresses at their per-address cap open twice the global cap.
const ATTACKERS: u8 = 8;
const WAIT: Duration = Duration::from_secs(10);

/// Answers `ok`; `/hold` first waits until the test releases it (a request in flight).
#[derive(Clone)]
struct Held {
    holding: Arc<AtomicUsize>,
    release: Arc<Semaphore>,
}

impl Held {
    fn new() -> Self {
        Held {
            holding: Arc::new(AtomicUsize::new(0)),
            release: Arc::new(Semaphore::new(0)),
        }
    }
}

impl hyper::service::Service<Request<Incoming>> for Held {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            if request.uri().path() == "/hold" {
                this.holding.fetch_add(1, Ordering::SeqCst);
                let _released = this.release.acquire().await;
            }
            Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
        })
    }
}

/// A listener whose cap the attack fills, with deadlines far beyond the test's length.
async fn start(service: Held, tls: Option<ServerTls>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ServeLimits {
        max_connections: CAP,
        max_connections_per_ip: PER_IP,
        first_byte_timeout: Duration::from_secs(30),
        header_read_timeout: Duration::from_secs(30),
        tls,
        ..ServeLimits::default()
    };
    tokio::spawn(serve(listener, service, limits, std::future::pending()));
    addr
}

/// Idle connections from eight other addresses, twice the cap; returns once the server
/// has closed as many of them as it must have to admit them all (`CAP` of them, the
/// legitimate client's fate decided by then).
async fn flood(addr: SocketAddr) -> Vec<TcpStream> {
    let sources: Vec<_> = (0..ATTACKERS).map(ipv4_source).collect();
    let flood = spread_idle_flood(addr, &sources, PER_IP).await;
    assert_eq!(
        flood.len(),
        usize::from(ATTACKERS) * PER_IP,
        "every connect completed"
    );
    server_closed("the flood to be admitted", &flood, CAP, WAIT).await;
    flood
}

/// Reads until the server closes; what it sent.
async fn answer_to_close(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Reads one `ok` answer of a kept-alive connection.
async fn kept_alive_answer(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_half_a_head_sent_is_not_closed_for_a_flood() {
    let addr = start(Held::new(), None).await;
    let mut client = connect_from(OTHER_SOURCE, addr).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    server_has_read(&client, WAIT).await;
    let _flood = flood(addr).await;
    // The rest of the head: a client that was closed to make room gets nothing.
    let _ = client.write_all(b"Connection: close\r\n\r\n").await;
    let answer = answer_to_close(&mut client).await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
        "the client with half a head sent was closed to make room: {answer:?}"
    );
}

/// A TLS client that stops after the server's first flight until `go`, then finishes the
/// handshake and a request; the answer.
fn tls_client_in_two_steps(
    mut socket: std::net::TcpStream,
    config: Arc<rustls::ClientConfig>,
    mid_handshake: tokio::sync::oneshot::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
) -> std::io::Result<String> {
    socket.set_read_timeout(Some(WAIT))?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    while tls.wants_write() {
        tls.write_tls(&mut socket)?;
    }
    // The server's first flight: it is in the handshake, waiting for our Finished.
    if tls.read_tls(&mut socket)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    tls.process_new_packets().map_err(std::io::Error::other)?;
    let _ = mid_handshake.send(());
    let _ = go.recv();
    let mut stream = rustls::Stream::new(&mut tls, &mut socket);
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            // A close without close_notify after the answer is still the answer.
            Err(_) if !answer.is_empty() => break,
            Err(error) => return Err(error),
        }
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_mid_tls_handshake_is_not_closed_for_a_flood() {
    let ca = TestCa::new("eviction ca").unwrap();
    let files = ca.server("srv").unwrap();
    let tls = ServerTls::load_polling(
        ServerTlsFiles {
            cert: files.cert.clone(),
            key: files.key.clone(),
            client_ca: None,
        },
        Duration::from_secs(60),
    )
    .unwrap();
    let addr = start(Held::new(), Some(tls)).await;
    let config = proxypool_edge::ClientTls::load(&proxypool_edge::ClientTlsFiles {
        ca: Some(ca.ca_path().to_owned()),
        cert: None,
        key: None,
    })
    .unwrap()
    .config();
    let socket = connect_from(OTHER_SOURCE, addr)
        .await
        .unwrap()
        .into_std()
        .unwrap();
    socket.set_nonblocking(false).unwrap();
    let (mid_tx, mid_rx) = tokio::sync::oneshot::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let client =
        tokio::task::spawn_blocking(move || tls_client_in_two_steps(socket, config, mid_tx, go_rx));
    tokio::time::timeout(WAIT, mid_rx)
        .await
        .expect("the server's first flight")
        .expect("the client reached the middle of its handshake");
    let _flood = flood(addr).await;
    go_tx.send(()).unwrap();
    let answer = client.await.unwrap();
    let answer = answer.unwrap_or_else(|error| {
        panic!("the client mid-handshake was closed to make room: {error}")
    });
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_reading_its_next_head_is_not_closed_for_a_newcomer() {
    let service = Held::new();
    let addr = start(service.clone(), None).await;
    let mut kept = connect_from(OTHER_SOURCE, addr).await.unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(
        kept_alive_answer(&mut kept)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // Every other slot busy with a request in flight, from four other addresses.
    let mut busy = Vec::new();
    for n in 0..CAP - 1 {
        let source = ipv4_source((n / PER_IP) as u8);
        let mut stream = connect_from(source, addr).await.unwrap();
        stream
            .write_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        busy.push(stream);
    }
    eventually_async("every other slot busy", WAIT, async || {
        (service.holding.load(Ordering::SeqCst) == CAP - 1).then_some(())
    })
    .await;
    // Half of the kept-alive connection's next head, then a newcomer.
    kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    server_has_read(&kept, WAIT).await;
    let newcomer = connect_from(ipv4_source(4), addr).await.unwrap();
    let kept_and_newcomer = [kept, newcomer];
    server_closed("the newcomer refused", &kept_and_newcomer, 1, WAIT).await;
    let [mut kept, _newcomer] = kept_and_newcomer;
    let _ = kept.write_all(b"\r\n").await;
    let answer = kept_alive_answer(&mut kept).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the connection reading its next head was closed to make room: {answer:?}"
    );
    // Idle again with nothing of a head read: now it is the one that makes room.
    let mut another = connect_from(ipv4_source(5), addr).await.unwrap();
    server_closed(
        "the idle connection closed",
        std::slice::from_ref(&kept),
        1,
        WAIT,
    )
    .await;
    another
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert!(
        answer_to_close(&mut another)
            .await
            .starts_with("HTTP/1.1 200")
    );
    service.release.add_permits(CAP);
    for mut stream in busy {
        assert!(
            kept_alive_answer(&mut stream)
                .await
                .starts_with("HTTP/1.1 200")
        );
    }
}
