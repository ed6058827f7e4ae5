//! [`LeaseLeadership`]: leadership from a fenced lease in the shared store.
//!
//! A background task (the renewer) calls [`LeaseStore::try_acquire`] for the `controller`
//! lease with this process's holder id:
//! - while the lease is ours, every third of the lease, so two renewals can fail before
//!   it is in danger; the term (the lease's fencing token) is published at once;
//! - while another controller holds it, every tenth of the lease and also right when the
//!   holder's lease ends, so a standby takes over as soon as a dead holder's lease lapses
//!   and within a tenth of the lease after a clean release;
//! - after an error, every tenth of the lease.
//!
//! **Fail closed.** The lease counts as ours only until *start of the last successful
//! call + ttl − guard*, measured on this process's monotonic clock from before the call
//! was sent, so it never outlives the lease in the store. Past that point without a
//! renewal (store down, a call hanging, a reply lost) the term is withdrawn, even while a
//! call is still in flight. The guard (call timeout + a tenth of the lease) covers a store
//! write issued just before the term ended, and clock skew between controllers: the
//! lease's expiry is written with the holder's wall clock and read with the others'.
//!
//! [`Leadership::resign`] withdraws the term and releases the lease; dropping the
//! leadership or [`Leadership::abandon`] stops the renewer without releasing (a crash, as
//! the other controllers see it).

use super::holder::holder_id;
use super::term::{Leadership, Term};
use crate::clock::SharedClock;
use async_trait::async_trait;
use proxypool_core::{Lease, LeaseStore, LockExt, PoolError, PoolResult, Unavailable};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout};

/// The lease the singleton loops run under.
pub const CONTROLLER_LEASE: &str = "controller";

/// Shortest pause between two attempts, so a store that keeps contradicting itself
/// cannot make the renewer spin.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// What the renewer asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// The lease's name ([`CONTROLLER_LEASE`]).
    pub name: String,
    /// This process's id in the lease ([`holder_id`]).
    pub holder: String,
    /// How long one acquisition or renewal lasts.
    pub ttl: Duration,
    /// Bound of one store call. Keep it well under the ttl (the configuration requires
    /// ttl >= 4 x call timeout): the term ends [`LeaseOptions::guard`] before the lease.
    pub call_timeout: Duration,
}

impl LeaseOptions {
    /// The controller lease for a fresh holder id.
    pub fn new(ttl: Duration, call_timeout: Duration) -> Self {
        LeaseOptions {
            name: CONTROLLER_LEASE.to_owned(),
            holder: holder_id(),
            ttl,
            call_timeout,
        }
    }

    /// Pause between renewals while the lease is ours.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// Pause after an error, and the longest a standby waits between attempts.
    pub fn retry_every(&self) -> Duration {
        (self.ttl / 10).max(MIN_PAUSE)
    }

    /// How long before the lease's end in the store the term is withdrawn.
    pub fn guard(&self) -> Duration {
        self.call_timeout + self.ttl / 10
    }
}

/// Leadership held through a lease in a [`LeaseStore`] (see the module doc).
pub struct LeaseLeadership {
    term: watch::Sender<Option<Term>>,
    stop: watch::Sender<bool>,
    /// The renewer; taken out (never awaited under the lock) to resign or abort it.
    task: Mutex<Option<JoinHandle<()>>>,
    options: LeaseOptions,
}

impl fmt::Debug for LeaseLeadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseLeadership")
            .field("options", &self.options)
            .field("term", &*self.term.borrow())
            .finish_non_exhaustive()
    }
}

impl LeaseLeadership {
    /// Starts competing for the lease: spawns the renewer on the current tokio runtime.
    pub fn start(
        store: Arc<dyn LeaseStore>,
        clock: SharedClock,
        options: LeaseOptions,
    ) -> LeaseLeadership {
        let term = watch::Sender::new(None);
        let (stop, stop_rx) = watch::channel(false);
        let renewer = Renewer {
            store,
            clock,
            options: options.clone(),
            term: term.clone(),
            held: None,
            last_token: None,
            failing: false,
        };
        let task = tokio::spawn(renewer.run(stop_rx));
        LeaseLeadership {
            term,
            stop,
            task: Mutex::new(Some(task)),
            options,
        }
    }

    /// This process's holder id in the lease.
    pub fn holder(&self) -> &str {
        &self.options.holder
    }

    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    fn take_task(&self) -> Option<JoinHandle<()>> {
        self.task.lock_or_recover().take()
    }
}

#[async_trait]
impl Leadership for LeaseLeadership {
    fn watch(&self) -> watch::Receiver<Option<Term>> {
        self.term.subscribe()
    }

    fn lease_name(&self) -> Option<&str> {
        Some(&self.options.name)
    }

    fn lease_holder(&self) -> Option<&str> {
        Some(&self.options.holder)
    }

    async fn resign(&self) {
        // Fails only when the renewer is already gone; then there is nothing to release.
        let _ = self.stop.send(true);
        if let Some(task) = self.take_task() {
            let _ = task.await;
        }
        self.term.send_replace(None);
    }

    fn abandon(&self) {
        if let Some(task) = self.take_task() {
            task.abort();
        }
        self.term.send_replace(None);
    }
}

impl Drop for LeaseLeadership {
    // A dropped leadership is a dead controller: it must stop renewing, and it has no
    // runtime to release from (the lease lapses). Loops still watching see the term end.
    fn drop(&mut self) {
        if let Some(task) = self.take_task() {
            task.abort();
        }
        self.term.send_replace(None);
    }
}

/// Why the renewer stops.
enum Stop {
    Resign,
    Abandon,
}

/// A lease we hold: its token, and when we must stop relying on it.
#[derive(Debug, Clone, Copy)]
struct Held {
    token: u64,
    until: Instant,
}

/// The background task behind a [`LeaseLeadership`].
struct Renewer {
    store: Arc<dyn LeaseStore>,
    clock: SharedClock,
    options: LeaseOptions,
    term: watch::Sender<Option<Term>>,
    held: Option<Held>,
    /// The token of the last lease held; released on resign even after a step-down,
    /// because the store may still have it.
    last_token: Option<u64>,
    /// Whether the last attempt failed (errors are logged once per outage).
    failing: bool,
}

impl Renewer {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            let pause = self.attempt().await;
            let stopped = self
                .guarded(async {
                    tokio::select! {
                        _ = sleep(pause) => None,
                        // `Err`: the leadership was dropped, which is an abort, not a resign.
                        stop = stop.wait_for(|stop| *stop) => {
                            Some(if stop.is_ok() { Stop::Resign } else { Stop::Abandon })
                        }
                    }
                })
                .await;
            match stopped {
                None => {}
                Some(Stop::Resign) => return self.resign().await,
                Some(Stop::Abandon) => return self.withdraw(),
            }
        }
    }

    /// One acquire-or-renew call; returns the pause before the next one.
    async fn attempt(&mut self) -> Duration {
        let store = self.store.clone();
        let options = self.options.clone();
        let ttl_ms = u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX);
        // Read before the call: the store's expiry is `now + ttl`, so our own deadline,
        // counted from here, can only be earlier than the store's.
        let started = Instant::now();
        let now = self.clock.now();
        let call = timeout(options.call_timeout, async move {
            store
                .try_acquire(now, &options.name, &options.holder, ttl_ms)
                .await
        });
        match self.guarded(call).await {
            Ok(Ok(Some(lease))) if lease.holder == self.options.holder => {
                self.recovered();
                let until = started + self.options.ttl.saturating_sub(self.options.guard());
                if until <= Instant::now() {
                    // Too slow to be worth anything: the next renewal decides.
                    self.failed("the renewal came back after its own deadline");
                    return self.options.retry_every();
                }
                self.held = Some(Held {
                    token: lease.token,
                    until,
                });
                self.last_token = Some(lease.token);
                if self.publish(Some(Term(lease.token))) {
                    tracing::info!(holder = %self.options.holder, term = lease.token, "leading: controller lease acquired");
                }
                self.options.renew_every()
            }
            Ok(Ok(_)) => {
                self.recovered();
                if self.held.take().is_some() {
                    tracing::warn!(holder = %self.options.holder, "stepped down: another controller holds the lease");
                }
                self.withdraw();
                self.standby_pause().await
            }
            // The store guard has not established the store yet (at start, or after a
            // loss, which it reports itself): nothing to lead in, and nothing to warn of.
            Ok(Err(PoolError::Unavailable(Unavailable::StoreLost(reason)))) => {
                tracing::debug!(%reason, "controller lease: waiting for the store's identity");
                self.withdraw_held();
                self.options.retry_every()
            }
            Ok(Err(e)) => {
                self.failed(&format!("{e}"));
                self.options.retry_every()
            }
            Err(_) => {
                self.failed("the call timed out");
                self.options.retry_every()
            }
        }
    }

    /// A standby's pause: until the holder's lease ends, at most [`LeaseOptions::retry_every`].
    async fn standby_pause(&mut self) -> Duration {
        let retry = self.options.retry_every();
        let now = self.clock.now();
        let current: Result<PoolResult<Option<Lease>>, _> = timeout(
            self.options.call_timeout,
            self.store.current(now, &self.options.name),
        )
        .await;
        match current {
            Ok(Ok(Some(lease))) => {
                tracing::debug!(leader = %lease.holder, "standby: another controller leads");
                Duration::from_millis(lease.expires_at_ms.saturating_sub(now))
                    .clamp(MIN_PAUSE, retry)
            }
            // Released or lapsed since the attempt: try again right away.
            Ok(Ok(None)) => MIN_PAUSE,
            _ => retry,
        }
    }

    /// Waits for `fut` while withdrawing the term when the held lease's deadline passes.
    async fn guarded<F: Future>(&mut self, fut: F) -> F::Output {
        tokio::pin!(fut);
        while let Some(held) = self.held {
            tokio::select! {
                output = &mut fut => return output,
                _ = sleep_until(held.until) => {
                    self.held = None;
                    self.withdraw();
                    tracing::warn!(holder = %self.options.holder, term = held.token, "stepped down: the controller lease could not be renewed in time");
                }
            }
        }
        fut.await
    }

    /// Gives the term up and the lease back (clean shutdown).
    async fn resign(mut self) {
        self.held = None;
        self.withdraw();
        let Some(token) = self.last_token else { return };
        let now = self.clock.now();
        let release = self
            .store
            .release(now, &self.options.name, &self.options.holder, token);
        match timeout(self.options.call_timeout, release).await {
            Ok(Ok(())) => {
                tracing::info!(holder = %self.options.holder, "controller lease released")
            }
            // The lease then lapses on its own; a standby waits for that.
            Ok(Err(e)) => tracing::warn!("could not release the controller lease: {e}"),
            Err(_) => tracing::warn!("could not release the controller lease: the call timed out"),
        }
    }

    /// Steps down at once: the lease held is in a store that is no longer the one the
    /// controller expects, so it fences nothing any more.
    fn withdraw_held(&mut self) {
        if let Some(held) = self.held.take() {
            tracing::warn!(holder = %self.options.holder, term = held.token, "stepped down: the store the lease was held in is lost");
        }
        self.withdraw();
    }

    fn withdraw(&self) {
        self.publish(None);
    }

    /// Publishes `term`; `true` when that changed it.
    fn publish(&self, term: Option<Term>) -> bool {
        self.term.send_if_modified(|current| {
            let changed = *current != term;
            *current = term;
            changed
        })
    }

    fn failed(&mut self, why: &str) {
        if !self.failing {
            tracing::warn!(holder = %self.options.holder, "controller lease: store call failed: {why}");
        } else {
            tracing::debug!("controller lease: store call failed again: {why}");
        }
        self.failing = true;
    }

    fn recovered(&mut self) {
        if self.failing {
            tracing::info!("controller lease: store reachable again");
        }
        self.failing = false;
    }
}
