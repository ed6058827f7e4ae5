//! The leader-only loops of one configuration ([`Loops`]): spawned together, stopped
//! together (each finishes its round), so a reload can restart them with new settings.

use super::assembly::Controller;
use crate::leadership::TermStore;
use crate::leadership::job::{LeaderJob, run_leader_job};
use crate::metrics::pool::PoolGauges;
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
        for reconciler in self.reconcilers() {
            tasks.push(self.spawn_leader_job(reconciler, &terms, &stopped));
        }
        tasks.push(self.spawn_leader_job(self.checker(), &terms, &stopped));
        tasks.push(self.spawn_leader_job(self.ownership_manager(), &terms, &stopped));
        tasks.push(self.spawn_leader_job(self.sweeper(), &terms, &stopped));
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

    /// One leader-only loop over the shared term store, this controller's leadership and
    /// the loops' stop signal.
    fn spawn_leader_job<J: LeaderJob>(
        &self,
        job: J,
        terms: &TermStore,
        stopped: &watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        tokio::spawn(run_leader_job(
            job,
            terms.clone(),
            self.leadership.watch(),
            stopped.clone(),
        ))
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
