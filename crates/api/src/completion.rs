//! [`RunToCompletion`]: admitted work finishes even when nobody waits for it any more.
//!
//! hyper drops a handler's future when the client goes away, and the timeout middleware
//! drops it when the request takes too long. An extraction dropped between the quota charge
//! and the store's answer would leave the charge without its result. Spawning every
//! extraction as a task would avoid that but costs a task and a cross-thread wake-up per
//! request; this wrapper polls the work in place and only hands it to the runtime if it is
//! dropped unfinished, so the common case pays one box.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls `future` in place; if dropped before it completes, spawns the rest on the current
/// runtime (when there is one: during runtime shutdown the work is dropped with it).
pub(crate) struct RunToCompletion<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    inner: Option<Pin<Box<F>>>,
}

impl<F> RunToCompletion<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub(crate) fn new(future: F) -> Self {
        RunToCompletion {
            inner: Some(Box::pin(future)),
        }
    }
}

impl<F> Future for RunToCompletion<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(future) = self.inner.as_mut() else {
            // Polled again after completion: a caller bug; never resolve twice.
            return Poll::Pending;
        };
        match future.as_mut().poll(cx) {
            Poll::Ready(output) => {
                self.inner = None;
                Poll::Ready(output)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F> Drop for RunToCompletion<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(unfinished) = self.inner.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            tracing::debug!("caller went away; finishing admitted work in the background");
            runtime.spawn(unfinished);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn completes_in_place_or_in_the_background() {
        assert_eq!(RunToCompletion::new(async { 7 }).await, 7);

        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let work = RunToCompletion::new(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            flag.store(true, Ordering::SeqCst);
        });
        // The caller gives up after 1 ms; the work goes on.
        assert!(
            tokio::time::timeout(Duration::from_millis(1), work)
                .await
                .is_err()
        );
        assert!(!finished.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(
            finished.load(Ordering::SeqCst),
            "dropped work still finished"
        );
    }
}
