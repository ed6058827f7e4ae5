//! The balancing decision, as a pure function so it can be tested without a store.
//!
//! Each live worker should own about the same capacity (sum of `max_sessions`), and no
//! more than `per_worker_target` proxies. New proxies go to the least loaded worker under
//! its share; a worker that owns clearly more than its share (by more than one proxy, so
//! the plan does not flap) drains the excess, which returns to the pool once the worker
//! has let go of it and then goes to the others. A cordoned worker keeps what it holds and
//! gets nothing new; a draining one gives everything back.

use proxypool_core::{ProxyId, WorkerId, WorkerMode};

/// One serving proxy a worker owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub proxy: ProxyId,
    pub epoch: u64,
    pub max_sessions: u32,
}

/// One live worker and what it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLoad {
    pub worker: WorkerId,
    pub held: Vec<Held>,
    /// What an operator said: `Cordoned` gets nothing new, `Draining` also gives back
    /// everything it holds.
    pub mode: WorkerMode,
}

/// A proxy that may be assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Free {
    pub proxy: ProxyId,
    pub max_sessions: u32,
}

/// What to do this round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub assign: Vec<(ProxyId, WorkerId)>,
    /// (proxy, owner, assignment epoch)
    pub drain: Vec<(ProxyId, WorkerId, u64)>,
}

/// Plans assignments and drains for `workers` given `free` proxies.
pub fn plan(workers: &[WorkerLoad], free: &[Free], per_worker_target: usize) -> Plan {
    let mut result = Plan::default();
    let active = |w: &WorkerLoad| w.mode == WorkerMode::Active;
    let serving = workers.iter().filter(|w| active(w)).count();
    // What a cordoned worker keeps is not there to share among the others.
    let held_total: usize = workers
        .iter()
        .filter(|w| w.mode != WorkerMode::Cordoned)
        .map(|w| w.held.len())
        .sum();
    let share = (held_total + free.len())
        .div_ceil(serving.max(1))
        .min(per_worker_target);

    // Counts and capacities as the plan proceeds; drains first so their slots count.
    let mut counts: Vec<usize> = Vec::with_capacity(workers.len());
    let mut loads: Vec<u64> = Vec::with_capacity(workers.len());
    for worker in workers {
        let mut held: Vec<&Held> = worker.held.iter().collect();
        let keep = match worker.mode {
            WorkerMode::Active => share,
            WorkerMode::Cordoned => held.len().min(per_worker_target),
            WorkerMode::Draining => 0,
        };
        let over_target = held.len() > per_worker_target;
        let over_share = worker.mode == WorkerMode::Active && held.len() > share + 1;
        if worker.mode == WorkerMode::Draining || over_target || over_share {
            // Keep the largest proxies (fewest moves for the capacity kept), drain the rest.
            held.sort_by(|a, b| {
                b.max_sessions
                    .cmp(&a.max_sessions)
                    .then(a.proxy.cmp(&b.proxy))
            });
            for excess in held.split_off(keep.min(held.len())) {
                result
                    .drain
                    .push((excess.proxy.clone(), worker.worker.clone(), excess.epoch));
            }
        }
        counts.push(held.len());
        loads.push(held.iter().map(|h| u64::from(h.max_sessions)).sum());
    }

    let mut free: Vec<&Free> = free.iter().collect();
    free.sort_by(|a, b| {
        b.max_sessions
            .cmp(&a.max_sessions)
            .then(a.proxy.cmp(&b.proxy))
    });
    for candidate in free {
        let target = (0..workers.len())
            .filter(|&i| active(&workers[i]) && counts[i] < share)
            .min_by_key(|&i| (loads[i], counts[i], &workers[i].worker));
        let Some(i) = target else { break };
        counts[i] += 1;
        loads[i] += u64::from(candidate.max_sessions);
        result
            .assign
            .push((candidate.proxy.clone(), workers[i].worker.clone()));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::{Protocol, proxy_id_for};

    fn pid(n: u16) -> ProxyId {
        proxy_id_for(Protocol::Http, "10.0.0.1", n, None)
    }

    fn worker(name: &str, held: &[u16]) -> WorkerLoad {
        WorkerLoad {
            worker: WorkerId::new(name).unwrap(),
            held: held
                .iter()
                .map(|n| Held {
                    proxy: pid(*n),
                    epoch: 1,
                    max_sessions: 4,
                })
                .collect(),
            mode: WorkerMode::Active,
        }
    }

    fn free(range: std::ops::Range<u16>) -> Vec<Free> {
        range
            .map(|n| Free {
                proxy: pid(n),
                max_sessions: 4,
            })
            .collect()
    }

    #[test]
    fn spreads_new_proxies_evenly() {
        let p = plan(&[worker("a", &[]), worker("b", &[])], &free(1..7), 100);
        assert_eq!(p.assign.len(), 6);
        let to_a = p.assign.iter().filter(|(_, w)| w.as_str() == "a").count();
        assert_eq!(to_a, 3);
        assert!(p.drain.is_empty());
    }

    #[test]
    fn respects_the_per_worker_target() {
        let p = plan(&[worker("a", &[])], &free(1..10), 4);
        assert_eq!(p.assign.len(), 4);
    }

    #[test]
    fn a_newcomer_gets_a_share_by_draining_the_incumbent() {
        let p = plan(
            &[worker("a", &[1, 2, 3, 4, 5, 6]), worker("b", &[])],
            &[],
            100,
        );
        assert_eq!(p.drain.len(), 3);
        assert!(p.drain.iter().all(|(_, w, _)| w.as_str() == "a"));
        assert!(p.assign.is_empty());
    }

    #[test]
    fn small_imbalances_do_not_flap() {
        let p = plan(&[worker("a", &[1, 2, 3]), worker("b", &[4, 5])], &[], 100);
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn a_draining_worker_gives_everything_back_and_gets_nothing() {
        let mut a = worker("a", &[1, 2, 3]);
        a.mode = WorkerMode::Draining;
        let p = plan(&[a, worker("b", &[])], &free(4..6), 100);
        assert_eq!(p.drain.len(), 3);
        assert!(p.assign.iter().all(|(_, w)| w.as_str() == "b"));
        assert_eq!(p.assign.len(), 2);
    }

    #[test]
    fn a_cordoned_worker_keeps_what_it_holds_and_gets_nothing() {
        let mut a = worker("a", &[1, 2, 3, 4, 5, 6]);
        a.mode = WorkerMode::Cordoned;
        let p = plan(&[a, worker("b", &[])], &free(10..14), 100);
        assert!(
            p.drain.is_empty(),
            "no rebalancing drains off a cordoned worker"
        );
        assert_eq!(p.assign.len(), 4);
        assert!(p.assign.iter().all(|(_, w)| w.as_str() == "b"));
    }

    #[test]
    fn capacity_decides_who_gets_the_next_proxy() {
        let mut a = worker("a", &[1]);
        a.held[0].max_sessions = 100;
        let b = worker("b", &[2]);
        let p = plan(&[a, b], &free(3..4), 100);
        assert_eq!(p.assign[0].1.as_str(), "b");
    }
}
