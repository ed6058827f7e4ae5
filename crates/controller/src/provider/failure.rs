//! Why a list fetch or a whole round fails: [`FetchError`] (the transfer, the redirect and
//! page rules) and [`RoundError`] (that, a body that is no list, or the store). Each has a
//! `kind`, the name the upstream's status and the metrics show.

use proxypool_core::PoolError;

/// Redirects one page's fetch follows at most.
pub const MAX_REDIRECTS: usize = 5;

/// Why a fetch failed; the kind is what the status API shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("cannot connect to the vendor")]
    Connect,
    /// The TLS handshake failed (the vendor's certificate is not trusted, or the TLS
    /// settings could not be loaded).
    #[error("TLS with the vendor failed: {0}")]
    Tls(String),
    #[error("the vendor did not answer in time")]
    Timeout,
    #[error("the vendor answered HTTP {0}")]
    Status(u16),
    #[error("the response is larger than max_bytes")]
    TooLarge,
    #[error("the response body could not be read")]
    Body,
    #[error("the request could not be built")]
    Request,
    /// A redirect or a next-page link led to a host and port that are neither the list
    /// URL's nor in `redirect_hosts`; the host and port are named (never the URL, which
    /// may hold a key).
    #[error(
        "the vendor sent the fetch to {0}, outside the list's host and port and redirect_hosts"
    )]
    ForeignHost(String),
    #[error("the vendor redirected from https down to http")]
    InsecureRedirect,
    /// The list's host, or a redirect's or next page's, is or resolves to an internal
    /// address (named, with the host when it is a name) and the upstream does not set
    /// `allow_private_hosts`: nothing was sent.
    #[error(
        "the vendor fetch would connect to {0}, an internal address (loopback, private, \
         link-local, ...): only allow_private_hosts permits that"
    )]
    PrivateHost(String),
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    #[error("the list has more pages than max_pages")]
    TooManyPages,
    #[error("a next-page link leads back to a page already read")]
    PageLoop,
    #[error("a next-page link is not a URL")]
    BadNextLink,
}

impl FetchError {
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Connect => "connect",
            FetchError::Tls(_) => "tls",
            FetchError::Timeout => "timeout",
            FetchError::Status(_) => "http_status",
            FetchError::TooLarge => "too_large",
            FetchError::Body => "body",
            FetchError::Request => "request",
            FetchError::ForeignHost(_) => "foreign_host",
            FetchError::InsecureRedirect => "insecure_redirect",
            FetchError::PrivateHost(_) => "private_host",
            FetchError::TooManyRedirects => "too_many_redirects",
            FetchError::TooManyPages => "too_many_pages",
            FetchError::PageLoop => "page_loop",
            FetchError::BadNextLink => "bad_next_link",
        }
    }
}

/// Why a round failed (nothing was upserted, or the store refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("the body is not a valid {0} list")]
    MalformedBody(&'static str),
    #[error("store: {0}")]
    Store(PoolError),
}

impl RoundError {
    pub fn kind(&self) -> &'static str {
        match self {
            RoundError::Fetch(e) => e.kind(),
            RoundError::MalformedBody(_) => "malformed_body",
            RoundError::Store(e) if e.is_unavailable() => "store_unavailable",
            RoundError::Store(_) => "store_rejected",
        }
    }
}
