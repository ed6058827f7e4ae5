//! Bodies of forwarded plain HTTP (the request body going upstream is
//! `crate::proxies::request_body`): [`ProxyBody`] (what the client gets: a short gateway answer, or
//! the upstream response whose end returns the upstream connection to its pool and ends
//! the proxy's active use).

use crate::access::Exchange;
use crate::policy::limits::ConnectionPermit;
use crate::proxies::capacity::Lease;
use crate::proxies::idle_pool::PoolKey;
use crate::proxies::request_body::CountingBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use metrics::Counter;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What finishing an upstream response gives back.
#[derive(Debug)]
pub(crate) struct Release {
    pub key: PoolKey,
    pub sender: SendRequest<CountingBody>,
    pub pool_cap: usize,
    /// Dropped when the response ends: the proxy's active use and the client's place.
    pub guards: (Lease, ConnectionPermit),
}

impl Release {
    fn finish(self, reusable: bool) {
        if reusable {
            self.guards
                .0
                .slot()
                .idle
                .put(self.key, self.sender, self.pool_cap);
        }
    }
}

/// An upstream response body in flight.
#[derive(Debug)]
pub(crate) struct UpstreamBody {
    inner: Incoming,
    counter: Counter,
    release: Option<Release>,
    /// The request's account, ended when this body is (its last byte, or dropped).
    exchange: Exchange,
}

/// The body of every response the HTTP listener sends.
#[derive(Debug)]
pub(crate) enum ProxyBody {
    /// A gateway-made answer (errors, CONNECT's 200).
    Full(Option<Bytes>),
    Upstream(UpstreamBody),
    /// Another fleet member's answer to a request relayed to it (`crate::inbound::relay`),
    /// holding what the relay keeps until the answer ends.
    Relayed(http_body_util::combinators::UnsyncBoxBody<Bytes, hyper::Error>),
}

impl ProxyBody {
    pub(crate) fn text(text: impl Into<String>) -> Self {
        ProxyBody::Full(Some(Bytes::from(text.into())))
    }

    pub(crate) fn empty() -> Self {
        ProxyBody::Full(None)
    }

    pub(crate) fn upstream(inner: Incoming, counter: Counter, release: Release) -> Self {
        let mut body = UpstreamBody {
            inner,
            counter,
            release: Some(release),
            exchange: Exchange::inert(),
        };
        if body.inner.is_end_stream() {
            // No body at all (204, 304, HEAD, length 0): hyper may never poll it.
            body.finish(true);
        }
        ProxyBody::Upstream(body)
    }
}

impl UpstreamBody {
    /// Carries the request's account to the end of this body.
    pub(crate) fn account(&mut self, exchange: Exchange) {
        self.exchange = exchange;
    }

    fn finish(&mut self, reusable: bool) {
        if let Some(release) = self.release.take() {
            release.finish(reusable);
        }
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        let complete = self.inner.is_end_stream();
        self.finish(complete);
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            ProxyBody::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            ProxyBody::Upstream(body) => {
                let polled = Pin::new(&mut body.inner).poll_frame(cx);
                match &polled {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Some(data) = frame.data_ref() {
                            body.counter.increment(data.len() as u64);
                            body.exchange.bytes(0, data.len() as u64);
                        }
                        if body.inner.is_end_stream() {
                            body.finish(true);
                        }
                    }
                    Poll::Ready(None) => body.finish(true),
                    Poll::Ready(Some(Err(_))) => body.finish(false),
                    Poll::Pending => {}
                }
                polled
            }
            ProxyBody::Relayed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(data) => data.is_none(),
            ProxyBody::Upstream(body) => body.inner.is_end_stream(),
            ProxyBody::Relayed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(data) => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            ProxyBody::Upstream(body) => body.inner.size_hint(),
            ProxyBody::Relayed(body) => body.size_hint(),
        }
    }
}
