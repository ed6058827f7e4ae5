//! The origin: an HTTP server that tells each client which address it came from.
//!
//! Every request gets JSON `{"exit": "<peer ip>", "method": ..., "path": ..., "host": ...}`,
//! so a test (or a person with curl) sees which upstream proxy's exit carried it.
//! `/status/NNN` answers with status NNN (same body), for checks that expect a status.
//!
//! Bans: like a real site that has blocked an address, the origin can refuse chosen exits
//! for chosen host names ([`Origin::ban`]): a request whose `Host` is that name, arriving
//! from that exit, is answered with the ban's status (403, 429, ...; same echo body, plus
//! `X-Sim-Banned: true`), whatever its path. Bans are set and lifted at runtime. Every
//! request is counted per (exit, host), banned or not ([`Origin::host_counts`]), so a test
//! can prove that no request to a host left through an exit after the exit was banned
//! there. Names reach the origin through the simulated upstreams, which resolve every name
//! under `.test` to loopback (see `exit`), so `http://shop-a.test:PORT/` is this origin.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::http::{Body, full, serve_connections};
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

/// Requests one (exit, host) pair sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCount {
    /// Every request, banned or not.
    pub requests: u64,
    /// Those answered with a ban status.
    pub banned: u64,
}

#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    // std Mutexes: each held only for one map read or update, never across an await.
    by_exit: Mutex<BTreeMap<IpAddr, u64>>,
    by_exit_host: Mutex<BTreeMap<(IpAddr, String), HostCount>>,
    bans: Mutex<HashMap<(IpAddr, String), StatusCode>>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The host name a `Host` header (or a ban) names: without the port and a trailing dot,
/// lower-case, so `Shop-A.test.:8080` and `shop-a.test` are one host.
pub fn host_name(raw: &str) -> String {
    let raw = raw.trim();
    let without_port = if let Some(rest) = raw.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(inside, _)| inside)
    } else {
        match raw.rsplit_once(':') {
            Some((host, port))
                if !host.contains(':') && port.chars().all(|c| c.is_ascii_digit()) =>
            {
                host
            }
            _ => raw,
        }
    };
    without_port.trim_end_matches('.').to_ascii_lowercase()
}

/// A running origin. Dropping it stops it.
#[derive(Debug)]
pub struct Origin {
    addr: SocketAddr,
    /// Serves https (its URLs say so).
    tls: bool,
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
        Self::start_at(SocketAddr::new(IpAddr::V4(ip), 0)).await
    }

    /// Starts on `addr` (port 0: any free port).
    pub async fn start_at(addr: SocketAddr) -> io::Result<Self> {
        Self::start_serving(addr, None).await
    }

    /// Starts on `127.0.0.1:0`, serving https with `config` (a site behind TLS).
    pub async fn start_tls(config: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        Self::start_serving(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), Some(config)).await
    }

    async fn start_serving(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let shutdown = Shutdown::new();
        let handler_counts = Arc::clone(&counts);
        let handler = move |req: Request<Incoming>, peer: SocketAddr| {
            let response = answer(&handler_counts, &req, peer);
            async move { response }
        };
        let serves_tls = tls.is_some();
        tokio::spawn(serve_connections(
            listener,
            shutdown.signal(),
            tls,
            Some,
            handler,
        ));
        Ok(Self {
            addr,
            tls: serves_tls,
            counts,
            _shutdown: shutdown,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port{path}` (`https://` when it serves TLS).
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme(), self.addr)
    }

    fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::Relaxed)
    }

    /// `http://{host}:port{path}` (`https://` when it serves TLS): this origin under a
    /// name, as reached through the simulated upstreams (`host` under `.test`).
    pub fn host_url(&self, host: &str, path: &str) -> String {
        format!("{}://{host}:{}{path}", self.scheme(), self.addr.port())
    }

    /// Requests answered so far, per peer address (exit).
    pub fn requests_by_exit(&self) -> BTreeMap<IpAddr, u64> {
        locked(&self.counts.by_exit).clone()
    }

    /// Bans `exit` for `host` (see [`host_name`]): its requests with that `Host` are
    /// answered `status` from now on. Banning again changes the status.
    pub fn ban(&self, exit: IpAddr, host: &str, status: StatusCode) {
        locked(&self.counts.bans).insert((exit, host_name(host)), status);
    }

    /// Lifts the ban of `exit` for `host`; whether there was one.
    pub fn unban(&self, exit: IpAddr, host: &str) -> bool {
        locked(&self.counts.bans)
            .remove(&(exit, host_name(host)))
            .is_some()
    }

    /// Lifts every ban.
    pub fn clear_bans(&self) {
        locked(&self.counts.bans).clear();
    }

    /// The bans in force, by exit and host.
    pub fn bans(&self) -> BTreeMap<(IpAddr, String), StatusCode> {
        locked(&self.counts.bans)
            .iter()
            .map(|(key, status)| (key.clone(), *status))
            .collect()
    }

    /// What `exit` sent to `host` so far.
    pub fn host_counts(&self, exit: IpAddr, host: &str) -> HostCount {
        locked(&self.counts.by_exit_host)
            .get(&(exit, host_name(host)))
            .copied()
            .unwrap_or_default()
    }

    /// Every (exit, host) pair seen so far and what it sent.
    pub fn requests_by_exit_and_host(&self) -> BTreeMap<(IpAddr, String), HostCount> {
        locked(&self.counts.by_exit_host).clone()
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
    let key = (peer.ip(), host_name(&echo.host));
    let ban = locked(&counts.bans).get(&key).copied();
    let status = ban.unwrap_or_else(|| {
        req.uri()
            .path()
            .strip_prefix("/status/")
            .and_then(|code| code.parse::<u16>().ok())
            .and_then(|code| StatusCode::from_u16(code).ok())
            .unwrap_or(StatusCode::OK)
    });
    // Counted before the answer leaves, so whoever reads the answer sees the count.
    counts.requests.fetch_add(1, Ordering::Relaxed);
    *locked(&counts.by_exit).entry(peer.ip()).or_default() += 1;
    {
        let mut by_host = locked(&counts.by_exit_host);
        let count = by_host.entry(key).or_default();
        count.requests += 1;
        count.banned += u64::from(ban.is_some());
    }
    let body = serde_json::to_vec(&echo).unwrap_or_default();
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if ban.is_some() {
        headers.insert("x-sim-banned", HeaderValue::from_static("true"));
    }
    response
}
