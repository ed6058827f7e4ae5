//! [`Sweeper`]: an optional helper thread that runs bounded sweeps on a schedule, for callers
//! that would rather not drive cleanup themselves. Dropping it stops and joins the thread.

use crate::clock::Clock;
use crate::engine::{SweepOutcome, TokenBucketEngine};
use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Something that can run one bounded cleanup pass.
pub trait Sweep: Send + Sync {
    /// Evicts at most `max_evictions` keys. See [`TokenBucketEngine::sweep`].
    fn sweep(&self, max_evictions: usize) -> SweepOutcome;
}

impl<C: Clock> Sweep for TokenBucketEngine<C> {
    fn sweep(&self, max_evictions: usize) -> SweepOutcome {
        TokenBucketEngine::sweep(self, max_evictions)
    }
}

/// Pause between batches while a sweep reports more work: short enough to clean a flood
/// quickly, long enough to let checks take the shard locks between batches.
const BACKLOG_PAUSE: Duration = Duration::from_millis(1);

/// A background thread sweeping a limiter every `interval`, `batch` evictions at a time.
pub struct Sweeper {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Sweeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sweeper")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl Sweeper {
    /// Starts the thread. The first sweep runs one `interval` from now.
    pub fn spawn<T: Sweep + 'static>(
        target: Arc<T>,
        interval: Duration,
        batch: usize,
    ) -> io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("throttle-sweeper".into())
            .spawn(move || {
                let mut wait = interval;
                // Waiting on the channel doubles as an interruptible sleep: dropping the
                // Sweeper disconnects it and the thread ends at once.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                    let outcome = target.sweep(batch);
                    wait = if outcome.more_work {
                        BACKLOG_PAUSE
                    } else {
                        interval
                    };
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // A panicking sweep already reported itself; nothing more to do here.
            let _ = thread.join();
        }
    }
}
