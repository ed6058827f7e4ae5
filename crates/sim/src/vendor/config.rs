//! How a [`VendorEndpoint`](super::VendorEndpoint) is started and made to misbehave:
//! [`VendorConfig`], the [`FleetConfig`] of the proxies behind the list, the
//! [`ListFormat`] and the [`ListFaults`]; the list API's [`ApiConfig`] and live
//! [`ApiKnobs`].

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::upstream::ProxyKind;

/// How the list is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListFormat {
    /// `host:port:user:pass` lines (`host:port` without credentials).
    #[default]
    Text,
    /// `scheme://host:port:user:pass` lines.
    TextWithScheme,
    /// A JSON array of objects.
    Json,
}

/// Ways the endpoint misbehaves on purpose. The default is a well-behaved vendor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFaults {
    /// Invalid entries mixed among the good ones (each wrong in a different way).
    pub malformed_entries: usize,
    /// Pad the body with whitespace up to this many bytes (still a valid list).
    pub oversized_body: Option<usize>,
    /// Answer this status (e.g. 500) with a short text body instead of the list.
    pub status: Option<u16>,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Send the body chunked (no `Content-Length`), in 8 KiB chunks.
    pub chunked: bool,
}

/// The proxies a vendor hands out and how each one is made.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// How many proxies are listed at any time.
    pub size: usize,
    /// Protocols, cycled over the proxies created (`[Http, Socks5]` alternates).
    pub kinds: Vec<ProxyKind>,
    /// Credentials every proxy requires (vendors usually issue one pair per account).
    pub credentials: Option<(String, String)>,
    /// Region labels, cycled.
    pub regions: Vec<String>,
    /// Carrier labels, cycled.
    pub carriers: Vec<String>,
    /// Latency each proxy adds before answering.
    pub latency: Duration,
    /// Failure probability of each proxy.
    pub failure_rate: f64,
    /// Seed of the first proxy's failure dice (the next ones use seed + 1, + 2, ...).
    pub seed: u64,
    /// The first exit address handed out; the next free 127.x.y.z follow.
    pub first_exit: Ipv4Addr,
    /// Where the proxies listen.
    pub listen_ip: Ipv4Addr,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            size: 4,
            kinds: vec![ProxyKind::Http, ProxyKind::Socks5],
            credentials: Some(("sim-user".into(), "sim-pass".into())),
            regions: Vec::new(),
            carriers: Vec::new(),
            latency: Duration::ZERO,
            failure_rate: 0.0,
            seed: 0,
            first_exit: Ipv4Addr::new(127, 0, 0, 2),
            listen_ip: Ipv4Addr::LOCALHOST,
        }
    }
}

/// The list API's fixed settings (see the `api` module): the token, the page size and
/// the Basic credentials of the text list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiConfig {
    /// `Authorization: Token <token>`.
    pub token: String,
    /// Proxies per page.
    pub page_size: usize,
    /// The Basic-auth text list's user and password.
    pub basic: (String, String),
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            token: "sim-api-token".into(),
            page_size: 2,
            basic: ("list-user".into(), "list-pass".into()),
        }
    }
}

/// The list API's live knobs. The default answers pages gzip-encoded, without redirects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiKnobs {
    /// The body's `Content-Encoding`.
    pub encoding: ContentEncoding,
    /// `/api/v1/proxies` answers 307 to the same page under `/api/v2/proxies`.
    pub redirect_once: bool,
    /// `/api/v1/proxies` answers 307 to this absolute URL (a foreign host, for tests).
    pub foreign_redirect: Option<String>,
    /// Every API page is a decompression bomb instead: this many spaces once decoded,
    /// compressed as `encoding` says into a body about a thousandth of that size.
    pub bomb_bytes: Option<usize>,
    /// The first page's next link is this absolute URL (a foreign host, for tests).
    pub foreign_next: Option<String>,
    /// The Webshare-shaped list answers only on this port of the endpoint (one
    /// [`VendorEndpoint::serve_second_port`](super::VendorEndpoint::serve_second_port)
    /// returned): a request to any other port is redirected there with `301`.
    pub webshare_port: Option<u16>,
}

/// How the API's pages are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentEncoding {
    #[default]
    Gzip,
    /// zlib-wrapped deflate, as HTTP's `deflate` is.
    Deflate,
}

/// How to start a [`VendorEndpoint`](super::VendorEndpoint).
#[derive(Clone, Debug, Default)]
pub struct VendorConfig {
    /// List format.
    pub format: ListFormat,
    /// The proxies behind the list.
    pub fleet: FleetConfig,
    /// Each proxy's lifetime; `None` = proxies never rotate by themselves.
    pub ttl: Option<Duration>,
    /// Misbehaviour, changeable later with [`VendorEndpoint::set_faults`](super::VendorEndpoint::set_faults).
    pub faults: ListFaults,
    /// The list API's token, page size and Basic credentials.
    pub api: ApiConfig,
}
