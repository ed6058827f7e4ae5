//! The readiness result behind `GET /readyz`, shared: one check at a time, its result
//! reused for [`MAX_AGE`], so a flood of probes costs the stores at most one check per
//! second. Hand-written (a mutex slot and a `watch` channel) because no crate the
//! workspace carries does single-flight with an expiry.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long one check's result answers probes.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);

/// What one check found: the names of the stores that did not answer (empty: ready).
pub(crate) type Down = Vec<&'static str>;

#[derive(Debug, Default)]
enum Slot {
    #[default]
    Empty,
    /// A check is running; its result arrives on the channel.
    Running(watch::Receiver<Option<Down>>),
    Done(Instant, Down),
}

/// The last check, or the one running (part of the API state).
#[derive(Debug, Default)]
pub(crate) struct ReadinessCache {
    slot: Mutex<Slot>,
}

impl ReadinessCache {
    /// A result at most [`MAX_AGE`] old: the cached one, the running check's, or the one
    /// `check` makes now (on its own task, so a caller that goes away does not cancel it
    /// for the others).
    pub(crate) async fn get<F, Fut>(self: &Arc<Self>, check: F) -> Down
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Down> + Send + 'static,
    {
        let mut running = {
            let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Slot::Done(at, down) if at.elapsed() < MAX_AGE => return down.clone(),
                Slot::Running(receiver) => receiver.clone(),
                _ => {
                    let (sender, receiver) = watch::channel(None);
                    *slot = Slot::Running(receiver.clone());
                    let checking = check();
                    let cache = Arc::clone(self);
                    tokio::spawn(async move {
                        let down = checking.await;
                        cache.finish(down.clone());
                        let _ = sender.send(Some(down));
                    });
                    receiver
                }
            }
        };
        let result = running.wait_for(Option::is_some).await.map(|d| d.clone());
        match result {
            Ok(Some(down)) => down,
            // The task ended without a result (a port panicked): not ready.
            _ => {
                let down = vec!["store", "quota"];
                self.finish(down.clone());
                down
            }
        }
    }

    fn finish(&self, down: Down) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Slot::Done(Instant::now(), down);
    }
}
