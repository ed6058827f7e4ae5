//! [`VendorEndpoint`]: the list server over a fleet (its plain list, and the API paths
//! `api` answers), its live knobs, and the rotation of proxies as they expire.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::config::{ApiConfig, ApiKnobs, ListFaults, ListFormat, VendorConfig};
use super::fleet::Fleet;
use super::listing::{self, Listing};
use super::{api, webshare};
use crate::http::{Body, chunked, full, respond, serve, serve_tls};
use crate::shutdown::{Shutdown, ShutdownSignal};
use crate::upstream::UpstreamProxy;

#[derive(Debug)]
struct Knobs {
    format: ListFormat,
    faults: ListFaults,
    api: ApiKnobs,
}

#[derive(Debug)]
struct Inner {
    fleet: Fleet,
    // std Mutex: read (cloned) at the start of a request, never held across an await.
    knobs: Mutex<Knobs>,
    api: ApiConfig,
    fetches: AtomicU64,
    /// Requests to the API's and the Basic list's paths.
    api_requests: AtomicU64,
}

/// A running vendor endpoint and its fleet. Dropping it stops the endpoint and every
/// proxy of the fleet.
#[derive(Debug)]
pub struct VendorEndpoint {
    addr: SocketAddr,
    inner: Arc<Inner>,
    shutdown: Shutdown,
}

impl VendorEndpoint {
    /// Starts the fleet, the rotation (when `ttl` is set) and the list endpoint on
    /// `127.0.0.1:0`.
    pub async fn start(config: VendorConfig) -> io::Result<Self> {
        Self::start_at(config, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// [`VendorEndpoint::start`] with the list endpoint on `list_addr` (port 0: any free
    /// port), for a vendor other hosts reach (a container of its own).
    pub async fn start_at(config: VendorConfig, list_addr: SocketAddr) -> io::Result<Self> {
        let fleet = Fleet::start(config.fleet, config.ttl).await?;
        let inner = Arc::new(Inner {
            fleet,
            knobs: Mutex::new(Knobs {
                format: config.format,
                faults: config.faults,
                api: ApiKnobs::default(),
            }),
            api: config.api,
            fetches: AtomicU64::new(0),
            api_requests: AtomicU64::new(0),
        });
        let listener = TcpListener::bind(list_addr).await?;
        let addr = listener.local_addr()?;
        let shutdown = Shutdown::new();
        let handler_inner = Arc::clone(&inner);
        let handler = move |req, _peer| answer(Arc::clone(&handler_inner), req);
        tokio::spawn(serve(listener, shutdown.signal(), Some, handler));
        if config.ttl.is_some() {
            tokio::spawn(rotate_on_expiry(Arc::clone(&inner), shutdown.signal()));
        }
        Ok(Self {
            addr,
            inner,
            shutdown,
        })
    }

    /// Where the endpoint listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves the same list over TLS with `config` on another loopback port (until the
    /// endpoint drops); returns its `https://127.0.0.1:port/proxies` URL, so the
    /// certificate must name 127.0.0.1.
    pub async fn serve_tls(&self, config: Arc<rustls::ServerConfig>) -> io::Result<String> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let inner = Arc::clone(&self.inner);
        let handler = move |req, _peer| answer(Arc::clone(&inner), req);
        tokio::spawn(serve_tls(listener, self.shutdown.signal(), config, handler));
        Ok(format!("https://{addr}/proxies"))
    }

    /// The list URL: `http://127.0.0.1:port/proxies`.
    pub fn url(&self) -> String {
        format!("http://{}/proxies", self.addr)
    }

    /// The paginated JSON API's first page: `http://127.0.0.1:port/api/v1/proxies` (the
    /// path that redirects when [`ApiKnobs::redirect_once`] is on).
    pub fn api_url(&self) -> String {
        format!("http://{}{}", self.addr, api::API_V1)
    }

    /// The text list behind HTTP Basic: `http://127.0.0.1:port/basic/proxies.txt`.
    pub fn basic_url(&self) -> String {
        format!("http://{}{}", self.addr, api::BASIC_TEXT)
    }

    /// The list in Webshare's shape, first page:
    /// `http://127.0.0.1:port/api/v2/proxy/list/?mode=direct`.
    pub fn webshare_url(&self) -> String {
        format!(
            "http://{}{}?mode=direct",
            self.addr,
            webshare::WEBSHARE_LIST
        )
    }

    /// The current list as the Webshare-shaped API shows it, each listing with its
    /// `valid` flag (every third is `false`).
    pub fn webshare_listings(&self) -> Vec<(Listing, bool)> {
        webshare::listed(self.listings())
            .into_iter()
            .enumerate()
            .map(|(position, listing)| (listing, webshare::webshare_valid(position)))
            .collect()
    }

    /// Serves every path of this endpoint on a second loopback port too (until the
    /// endpoint drops), for a vendor that moves its API to another port of its host;
    /// returns the port.
    pub async fn serve_second_port(&self) -> io::Result<u16> {
        let listener = TcpListener::bind((self.addr.ip(), 0)).await?;
        let port = listener.local_addr()?.port();
        let inner = Arc::clone(&self.inner);
        let handler = move |req, _peer| answer(Arc::clone(&inner), req);
        tokio::spawn(serve(listener, self.shutdown.signal(), Some, handler));
        Ok(port)
    }

    /// The API's token, page size and Basic credentials.
    pub fn api_config(&self) -> &ApiConfig {
        &self.inner.api
    }

    /// Changes the API's knobs from the next request on.
    pub fn set_api_knobs(&self, knobs: ApiKnobs) {
        self.knobs().api = knobs;
    }

    /// How many requests the API and the Basic list answered.
    pub fn api_requests(&self) -> u64 {
        self.inner.api_requests.load(Ordering::Relaxed)
    }

    /// The proxies currently listed, in list order.
    pub fn proxies(&self) -> Vec<Arc<UpstreamProxy>> {
        self.inner.fleet.proxies()
    }

    /// The current list, as it would be served (without fault entries).
    pub fn listings(&self) -> Vec<Listing> {
        self.inner.fleet.listings()
    }

    /// How many times the list was requested.
    pub fn fetches(&self) -> u64 {
        self.inner.fetches.load(Ordering::Relaxed)
    }

    /// Changes the misbehaviour from the next request on.
    pub fn set_faults(&self, faults: ListFaults) {
        self.knobs().faults = faults;
    }

    /// Changes the list format from the next request on.
    pub fn set_format(&self, format: ListFormat) {
        self.knobs().format = format;
    }

    /// Retires the `count` proxies closest to expiry now and lists new ones on fresh
    /// exits in their place (what a TTL would do later). Returns the new proxies.
    pub async fn rotate(&self, count: usize) -> io::Result<Vec<Arc<UpstreamProxy>>> {
        self.inner.fleet.rotate_oldest(count).await
    }

    /// How many proxies were replaced so far (by TTL or [`VendorEndpoint::rotate`]).
    pub fn replaced(&self) -> u64 {
        self.inner.fleet.replaced()
    }

    /// Waits until at least `count` proxies were replaced in all: the signal for tests
    /// that wait on TTL rotation.
    pub async fn wait_replaced(&self, count: u64) {
        self.inner.fleet.wait_replaced(count).await;
    }

    fn knobs(&self) -> std::sync::MutexGuard<'_, Knobs> {
        self.inner
            .knobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for VendorEndpoint {
    fn drop(&mut self) {
        self.inner.fleet.shutdown_all();
    }
}

/// Sleeps until the next proxy expires, replaces the expired ones, repeats.
async fn rotate_on_expiry(inner: Arc<Inner>, mut signal: ShutdownSignal) {
    loop {
        let next = inner.fleet.next_expiry();
        tokio::select! {
            () = signal.wait() => return,
            () = sleep_until(next) => {}
        }
        if inner
            .fleet
            .rotate_expired(tokio::time::Instant::now())
            .await
            .is_err()
        {
            // Could not bind a replacement: try again shortly rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn answer(inner: Arc<Inner>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    if [
        api::API_V1,
        api::API_V2,
        api::BASIC_TEXT,
        webshare::WEBSHARE_LIST,
    ]
    .contains(&path)
    {
        inner.api_requests.fetch_add(1, Ordering::Relaxed);
        let knobs = inner
            .knobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .api
            .clone();
        let listings = inner.fleet.listings();
        let query = req.uri().query().unwrap_or_default();
        return if path == api::BASIC_TEXT {
            api::answer_basic(&inner.api, req.headers(), &listings)
        } else if path == webshare::WEBSHARE_LIST {
            let http = webshare::listed(listings);
            webshare::answer_webshare(&inner.api, &knobs, query, req.headers(), &http)
        } else {
            api::answer_api(&inner.api, &knobs, path, query, req.headers(), &listings)
        };
    }
    inner.fetches.fetch_add(1, Ordering::Relaxed);
    let (format, faults) = {
        let knobs = inner.knobs.lock().unwrap_or_else(PoisonError::into_inner);
        (knobs.format, knobs.faults.clone())
    };
    if !faults.delay.is_zero() {
        tokio::time::sleep(faults.delay).await;
    }
    if let Some(status) = faults.status {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return respond(status, "vendor error\n");
    }
    let mut body = render(format, inner.fleet.listings(), faults.malformed_entries);
    if let Some(size) = faults.oversized_body {
        // Trailing whitespace keeps both formats valid: only the size is wrong.
        body.resize(body.len().max(size), b'\n');
    }
    let content_type = match format {
        ListFormat::Json => "application/json",
        ListFormat::Text | ListFormat::TextWithScheme => "text/plain; charset=utf-8",
    };
    let body = if faults.chunked {
        chunked(body.chunks(8192).map(Bytes::copy_from_slice).collect())
    } else {
        full(body)
    };
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn render(format: ListFormat, listings: Vec<Listing>, malformed: usize) -> Vec<u8> {
    match format {
        ListFormat::Text | ListFormat::TextWithScheme => {
            let with_scheme = format == ListFormat::TextWithScheme;
            let good: Vec<String> = listings.iter().map(|l| l.text_line(with_scheme)).collect();
            let pool: Vec<String> = listing::MALFORMED_TEXT
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            let mut text = listing::interleave(good, malformed, &pool).join("\n");
            text.push('\n');
            text.into_bytes()
        }
        ListFormat::Json => {
            let good = listings.iter().map(Listing::json).collect();
            let entries = listing::interleave(good, malformed, &listing::malformed_json());
            serde_json::to_vec(&entries).unwrap_or_default()
        }
    }
}
