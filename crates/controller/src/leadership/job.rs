//! The one scaffold of the leader-only loops (reconciler, checker, ownership manager,
//! sweeper): wait for a term, run a round while the term lasts (dropping it the moment the
//! term ends), pause, and stop when asked. Each loop only says what a round is and how
//! long to pause after it ([`LeaderJob`]).

use super::rounds::{wait_for_term, while_leading};
use super::term::Term;
use super::term_store::TermStore;
use proxypool_core::ActivityPool;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// What one leader-only loop does per round.
pub(crate) trait LeaderJob: Send + 'static {
    /// For logs.
    const NAME: &'static str;

    /// A new term begins: from now on every store call goes through `store`, which is
    /// fenced with the term (see [`TermStore`]).
    fn begin_term(&mut self, store: Arc<dyn ActivityPool>);

    /// One round; returns the pause before the next one.
    fn round(&mut self) -> impl Future<Output = Duration> + Send;

    /// The round was dropped because the term ended (its store calls are atomic, so
    /// nothing is half done; a job may tell others to re-read the store).
    fn dropped(&mut self) {}

    /// Cuts a pause short when notified (e.g. a worker registered).
    fn wake(&self) -> Option<Arc<Notify>> {
        None
    }
}

/// Runs `job` while this controller leads, until `stop` turns true (the round in flight
/// finishes first).
pub(crate) async fn run_leader_job<J: LeaderJob>(
    mut job: J,
    store: TermStore,
    mut leadership: watch::Receiver<Option<Term>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut current = None;
    while let Some(term) = wait_for_term(&mut leadership, &mut stop).await {
        if current != Some(term) {
            job.begin_term(store.for_term(term));
            current = Some(term);
        }
        let Some(pause) = while_leading(term, &mut leadership, job.round()).await else {
            tracing::debug!(job = J::NAME, "round dropped: no longer leading");
            job.dropped();
            continue;
        };
        let wake = job.wake();
        let woken = async {
            match &wake {
                Some(notify) => notify.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            () = woken => {}
            _ = stop.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[derive(Debug)]
    struct Counting {
        rounds: Arc<AtomicU32>,
        terms: Arc<AtomicU32>,
        wake: Arc<Notify>,
    }

    impl LeaderJob for Counting {
        const NAME: &'static str = "counting";

        fn begin_term(&mut self, _store: Arc<dyn ActivityPool>) {
            self.terms.fetch_add(1, Ordering::SeqCst);
        }

        async fn round(&mut self) -> Duration {
            self.rounds.fetch_add(1, Ordering::SeqCst);
            Duration::from_secs(3600)
        }

        fn wake(&self) -> Option<Arc<Notify>> {
            Some(self.wake.clone())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_run_only_while_leading_pause_until_woken_and_stop_when_asked() {
        let rounds = Arc::new(AtomicU32::new(0));
        let wake = Arc::new(Notify::new());
        let (term, leadership) = watch::channel(None);
        let (stop, stopped) = watch::channel(false);
        let terms = Arc::new(AtomicU32::new(0));
        let job = Counting {
            rounds: rounds.clone(),
            terms: terms.clone(),
            wake: wake.clone(),
        };
        let store = TermStore::new(
            Arc::new(proxypool_pool::MemoryPool::default()),
            &crate::leadership::AlwaysLeader::new(),
        );
        let task = tokio::spawn(run_leader_job(job, store, leadership, stopped));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 0, "no term, no round");
        term.send_replace(Some(Term(1)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 1);
        wake.notify_one();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            2,
            "a wake cuts the pause short"
        );
        assert_eq!(
            terms.load(Ordering::SeqCst),
            1,
            "one term, one fenced store"
        );
        term.send_replace(Some(Term(2)));
        wake.notify_one();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            terms.load(Ordering::SeqCst),
            2,
            "a new term, a new fenced store"
        );
        stop.send_replace(true);
        task.await.unwrap();
        assert_eq!(rounds.load(Ordering::SeqCst), 3);
    }
}
