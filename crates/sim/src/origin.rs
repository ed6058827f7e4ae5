//! The origin: an HTTP server that tells each client which address it came from.
//!
//! Every request gets JSON `{"exit": "<peer ip>", "method": ..., "path": ..., "host": ...}`,
//! so a test (or a person with curl) sees which upstream proxy's exit carried it.
//! `/status/NNN` answers with status NNN (same body), for checks that expect a status.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::http::{Body, full, serve};
use crate::shutdown::Shutdown;

/// What the origin answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echo {
    /// The peer address the origin saw: the exit of the proxy that carried the request.
    pub exit: IpAddr,
    /// The request method.
    pub method: String,
    /// Path and query as received.
    pub path: String,
    /// The `Host` header, empty when absent.
    pub host: String,
}

#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    // std Mutex: held only for one map update, never across an await.
    by_exit: Mutex<BTreeMap<IpAddr, u64>>,
}

/// A running origin. Dropping it stops it.
#[derive(Debug)]
pub struct Origin {
    addr: SocketAddr,
    counts: Arc<Counts>,
    _shutdown: Shutdown,
}

impl Origin {
    /// Starts on `127.0.0.1:0`.
    pub async fn start() -> io::Result<Self> {
        Self::start_on(Ipv4Addr::LOCALHOST).await
    }

    /// Starts on `ip:0`.
    pub async fn start_on(ip: Ipv4Addr) -> io::Result<Self> {
        let listener = TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let shutdown = Shutdown::new();
        let handler_counts = Arc::clone(&counts);
        let handler = move |req: Request<Incoming>, peer: SocketAddr| {
            let response = answer(&handler_counts, &req, peer);
            async move { response }
        };
        tokio::spawn(serve(listener, shutdown.signal(), Some, handler));
        Ok(Self {
            addr,
            counts,
            _shutdown: shutdown,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::Relaxed)
    }

    /// Requests answered so far, per peer address (exit).
    pub fn requests_by_exit(&self) -> BTreeMap<IpAddr, u64> {
        self.counts
            .by_exit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

fn answer(counts: &Counts, req: &Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    let echo = Echo {
        exit: peer.ip(),
        method: req.method().to_string(),
        path: req
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned()),
        host: req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
    };
    let status = req
        .uri()
        .path()
        .strip_prefix("/status/")
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::OK);
    // Counted before the answer leaves, so whoever reads the answer sees the count.
    counts.requests.fetch_add(1, Ordering::Relaxed);
    *counts
        .by_exit
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(peer.ip())
        .or_default() += 1;
    let body = serde_json::to_vec(&echo).unwrap_or_default();
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
