//! Bodies of forwarded plain HTTP: [`CountingBody`] (the client's request body going
//! upstream, counted) and [`ProxyBody`] (what the client gets: a short gateway answer, or
//! the upstream response whose end returns the upstream connection to its pool and ends
//! the proxy's active use).

use super::pool::PoolKey;
use crate::admission::ConnectionPermit;
use crate::capacity::Lease;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use metrics::Counter;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A request body that counts its bytes (none: the empty body of a request sent again).
#[derive(Debug)]
pub(crate) struct CountingBody {
    inner: Option<Incoming>,
    counter: Counter,
}

impl CountingBody {
    pub(crate) fn new(inner: Incoming, counter: Counter) -> Self {
        Self {
            inner: Some(inner),
            counter,
        }
    }

    /// The body of a bodyless request sent again through another proxy.
    pub(crate) fn empty(counter: Counter) -> Self {
        Self {
            inner: None,
            counter,
        }
    }
}

impl Body for CountingBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            this.counter.increment(data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

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
}

/// The body of every response the HTTP listener sends.
#[derive(Debug)]
pub(crate) enum ProxyBody {
    /// A gateway-made answer (errors, CONNECT's 200).
    Full(Option<Bytes>),
    Upstream(UpstreamBody),
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
        };
        if body.inner.is_end_stream() {
            // No body at all (204, 304, HEAD, length 0): hyper may never poll it.
            body.finish(true);
        }
        ProxyBody::Upstream(body)
    }
}

impl UpstreamBody {
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
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(data) => data.is_none(),
            ProxyBody::Upstream(body) => body.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(data) => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            ProxyBody::Upstream(body) => body.inner.size_hint(),
        }
    }
}
