//! [`CountingBody`]: the body of every request sent on an upstream connection (the
//! client's body counted as it streams, or none for a request sent again). It is the body
//! type of the kept-alive connections each slot holds ([`crate::proxies::idle_pool`]).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use metrics::Counter;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

/// A request body that counts its bytes (none: the empty body of a request sent again).
#[derive(Debug)]
pub(crate) struct CountingBody {
    inner: Option<Incoming>,
    counter: Counter,
    /// This request's own count, for its access-log line (only while the log is on).
    meter: Option<Arc<AtomicU64>>,
}

impl CountingBody {
    pub(crate) fn new(inner: Incoming, counter: Counter, meter: Option<Arc<AtomicU64>>) -> Self {
        Self {
            inner: Some(inner),
            counter,
            meter,
        }
    }

    /// The body of a bodyless request sent again through another proxy.
    pub(crate) fn empty(counter: Counter) -> Self {
        Self {
            inner: None,
            counter,
            meter: None,
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
            if let Some(meter) = &this.meter {
                meter.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
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
