//! The scaffold behind a load balancer that speaks the PROXY protocol: its header names
//! the request's [`Peer`]; the balancer's connection without one is closed; a peer that is
//! not a listed balancer is served as itself, its PROXY header not believed.

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
