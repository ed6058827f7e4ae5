//! The leader-only loops of one configuration ([`Loops`]): spawned together, stopped
//! together (each finishes its round), so a reload can restart them with new settings.

use super::assembly::Controller;
use crate::leadership::job::{LeaderJob, run_leader_job};
use crate::leadership::{Term, TermStore};
use crate::metrics::pool::PoolGauges;
use proxypool_core::StoreStatus;
use tokio::sync::watch;
use tokio::task::JoinHandle;

impl Controller {
    /// Spawns the leader-only loops (one reconciler per upstream, the checker, the
    /// ownership manager, the sweeper) with the configuration in force, and the metrics
    /// gauges' reader. Each leader-only loop waits for this controller to lead and drops
    /// its round when the term ends.
    pub(super) fn spawn_loops(&self) -> Loops {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        let terms = TermStore::new(self.metered.clone(), self.leadership.as_ref());
        let (leading, gate) = self.established_terms(&stopped);
        tasks.extend(gate);
        for reconciler in self.reconcilers() {
            tasks.push(self.spawn_leader_job(reconciler, &terms, &leading, &stopped));
        }
        tasks.push(self.spawn_leader_job(self.checker(), &terms, &leading, &stopped));
        tasks.push(self.spawn_leader_job(self.ownership_manager(), &terms, &leading, &stopped));
        tasks.push(self.spawn_leader_job(self.sweeper(), &terms, &leading, &stopped));
        // Not leader-only: every controller's `/metrics` shows the pool and its term.
        let gauges = PoolGauges {
            pool: self.metered.clone(),
            clock: self.clock.clone(),
            upstreams: self
                .config()
                .upstreams
                .iter()
                .map(|u| u.id.clone())
                .collect(),
            publisher: self.publisher.clone(),
            leadership: self.leadership.watch(),
        };
        tasks.push(tokio::spawn(gauges.run(stopped)));
        Loops { stop, tasks }
    }

    /// One leader-only loop over the shared term store, the terms it may run in and the
    /// loops' stop signal.
    fn spawn_leader_job<J: LeaderJob>(
        &self,
        job: J,
        terms: &TermStore,
        leading: &watch::Receiver<Option<Term>>,
        stopped: &watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        tokio::spawn(run_leader_job(
            job,
            terms.clone(),
            leading.clone(),
            stopped.clone(),
        ))
    }

    /// The terms as the leader-only loops see them. With a store guard, a term counts only
    /// while the guard has the store established (not at start before its first check,
    /// nor after a loss until the new store is in place): every call would be refused
    /// then, and a round would only fail. Without a guard, the leadership's own terms. The
    /// task that keeps the gated terms current, if any, ends with the loops.
    fn established_terms(
        &self,
        stopped: &watch::Receiver<bool>,
    ) -> (watch::Receiver<Option<Term>>, Option<JoinHandle<()>>) {
        let mut leadership = self.leadership.watch();
        let Some(guard) = &self.guard else {
            return (leadership, None);
        };
        let mut store = guard.watch();
        let mut stopped = stopped.clone();
        let gated = move |term: Option<Term>, status: &StoreStatus| {
            term.filter(|_| {
                matches!(
                    status,
                    StoreStatus::Ok { .. } | StoreStatus::Recovering { .. }
                )
            })
        };
        let (sender, receiver) = watch::channel(gated(
            *leadership.borrow_and_update(),
            &store.borrow_and_update(),
        ));
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = leadership.changed() => if changed.is_err() { break },
                    changed = store.changed() => if changed.is_err() { break },
                    _ = stopped.wait_for(|stop| *stop) => break,
                }
                let term = gated(*leadership.borrow_and_update(), &store.borrow_and_update());
                sender.send_if_modified(|current| {
                    let changed = *current != term;
                    *current = term;
                    changed
                });
            }
        });
        (receiver, Some(task))
    }
}

/// The running leader-only loops and their own stop signal (a reload restarts them
/// without touching the control API server).
#[derive(Debug)]
pub(super) struct Loops {
    pub(super) stop: watch::Sender<bool>,
    pub(super) tasks: Vec<JoinHandle<()>>,
}

impl Loops {
    /// Lets each loop finish its current round, then waits for all of them.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }

    pub(super) fn abort(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
