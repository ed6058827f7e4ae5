//! The scaffold behind a load balancer that speaks the PROXY protocol: its header names
//! the request's [`Peer`]; the balancer's connection without one is closed; a peer that is
//! not a listed balancer is served as itself, its PROXY header not believed. A balancer
//! listed as carrying many clients without the protocol counts against the global cap
//! only, and a connection that sends nothing is closed at the first-byte deadline (or at
//! once by a shutdown).

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use proxypool_edge::{Peer, ServeLimits, serve};
use std::convert::Infallible;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Answers with the peer address the scaffold gave the request.
#[derive(Clone)]
struct EchoPeer;

impl hyper::service::Service<Request<Incoming>> for EchoPeer {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let peer = request
            .extensions()
            .get::<Peer>()
            .map_or("none".to_owned(), |peer| peer.0.ip().to_string());
        std::future::ready(Ok(Response::new(Full::new(Bytes::from(format!(
            "peer={peer}"
        ))))))
    }
}

async fn start(balancers: Vec<(std::net::IpAddr, u8)>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ServeLimits {
        header_read_timeout: Duration::from_secs(2),
        proxy_protocol_from: balancers,
        ..ServeLimits::default()
    };
    tokio::spawn(serve(listener, EchoPeer, limits, std::future::pending()));
    addr
}

async fn exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer));
    assert!(read.await.is_ok(), "neither answered nor closed");
    String::from_utf8_lossy(&answer).into_owned()
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balancer_s_proxy_header_names_the_peer() {
    let addr = start(vec![("127.0.0.0".parse().unwrap(), 8)]).await;
    let header = b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 80\r\n";
    let answer = exchange(addr, &[&header[..], REQUEST].concat()).await;
    assert!(answer.ends_with("peer=203.0.113.7"), "{answer}");
    let answer = exchange(addr, REQUEST).await;
    assert!(
        answer.is_empty(),
        "a balancer's connection without a header: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_anyone_else_the_header_is_not_believed() {
    let addr = start(vec![("10.0.0.0".parse().unwrap(), 8)]).await;
    let answer = exchange(addr, REQUEST).await;
    assert!(answer.ends_with("peer=127.0.0.1"), "{answer}");
    let header = b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 80\r\n";
    let answer = exchange(addr, &[&header[..], REQUEST].concat()).await;
    assert!(!answer.contains("203.0.113.7"), "{answer}");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

/// Holds `n` silent connections to `addr` from `source` and says how many the server kept.
async fn held(source: std::net::IpAddr, addr: std::net::SocketAddr, n: usize) -> usize {
    let mut streams = Vec::new();
    for _ in 0..n {
        streams.push(
            proxypool_testkit::edge::connect_from(source, addr)
                .await
                .unwrap(),
        );
    }
    proxypool_testkit::edge::still_open(streams, Duration::from_millis(300)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balancer_without_the_proxy_protocol_is_not_counted_as_one_address() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ServeLimits {
        max_connections: 64,
        max_connections_per_ip: 2,
        uncounted_per_ip: vec![("127.0.0.5".parse().unwrap(), 32)],
        ..ServeLimits::default()
    };
    tokio::spawn(serve(listener, EchoPeer, limits, std::future::pending()));
    let balancer = "127.0.0.5".parse().unwrap();
    assert_eq!(
        held(balancer, addr, 8).await,
        8,
        "the balancer carries many clients"
    );
    let client = "127.0.0.6".parse().unwrap();
    assert_eq!(
        held(client, addr, 8).await,
        2,
        "anyone else is capped per address"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_at_the_first_byte_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ServeLimits {
        first_byte_timeout: Duration::from_millis(300),
        header_read_timeout: Duration::from_secs(10),
        ..ServeLimits::default()
    };
    tokio::spawn(serve(listener, EchoPeer, limits, std::future::pending()));
    let silent = TcpStream::connect(addr).await.unwrap();
    let started = std::time::Instant::now();
    let open = proxypool_testkit::edge::still_open(vec![silent], Duration::from_secs(5)).await;
    assert_eq!(open, 0, "a silent connection outlived 5 s");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // One that speaks at once is served as before.
    assert!(exchange(addr, REQUEST).await.ends_with("peer=127.0.0.1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_by_the_shutdown_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = ServeLimits {
        first_byte_timeout: Duration::from_secs(10),
        header_read_timeout: Duration::from_secs(10),
        ..ServeLimits::default()
    };
    let server = tokio::spawn(serve(listener, EchoPeer, limits, async {
        let _ = stopped.await;
    }));
    let silent = TcpStream::connect(addr).await.unwrap();
    // Connections are accepted in the order they came: once a later one is answered, the
    // scaffold holds the silent one.
    assert!(exchange(addr, REQUEST).await.ends_with("peer=127.0.0.1"));
    let _ = stop.send(());
    let open = proxypool_testkit::edge::still_open(vec![silent], Duration::from_secs(2)).await;
    assert_eq!(open, 0, "a silent connection held the shutdown up");
    tokio::time::timeout(Duration::from_secs(2), server)
        .await
        .expect("the scaffold returned once the silent connection was gone")
        .unwrap()
        .unwrap();
}
