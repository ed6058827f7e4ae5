//! The balancing decision, as a pure function so it can be tested without a store.
//!
//! Each live worker should own about the same capacity (sum of `max_sessions`), and no
//! more than `per_worker_target` proxies. New proxies go to the least loaded worker under
//! its share; a worker that owns clearly more than its share (by more than one proxy, so
//! the plan does not flap) drains the excess, which returns to the pool once the worker
//! has let go of it and then goes to the others. A cordoned worker keeps what it holds and
//! gets nothing new; a draining one gives everything back.
//!
//! Extraction's share: of the usable proxies (every worker's serving leases plus the free
//! ones), `extraction_share` (rounded up) stays unowned, so the plan makes no new lease
//! that would leave fewer free. It never drains for it: when extraction uses up the free
//! ones, the workers keep what they hold (otherwise a busy extraction client would shrink
//! the gateways round after round), and the share is restored from the proxies that come
//! next.

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

/// The bounds a plan keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Most proxies one worker holds.
    pub per_worker_target: usize,
    /// The fraction (0 to 1) of the usable proxies left unowned for extraction.
    pub extraction_share: f64,
}

impl Limits {
    /// How many of `usable` proxies stay unowned: the share rounded up, counted in parts
    /// per million so 0.07 of 100 keeps 7 (in floating point it is 7.000000000000001,
    /// which would round up to 8). Any share above 0 keeps at least one part per million.
    pub fn kept_for_extraction(&self, usable: usize) -> usize {
        let share = self.extraction_share.clamp(0.0, 1.0);
        let ppm = if share > 0.0 {
            ((share * 1e6).round() as u128).max(1)
        } else {
            0
        };
        let kept = (usable as u128 * ppm).div_ceil(1_000_000);
        usize::try_from(kept).unwrap_or(usable).min(usable)
    }
}

/// Plans assignments and drains for `workers` given `free` proxies.
pub fn plan(workers: &[WorkerLoad], free: &[Free], limits: Limits) -> Plan {
    let per_worker_target = limits.per_worker_target;
    let mut result = Plan::default();
    let active = |w: &WorkerLoad| w.mode == WorkerMode::Active;
    let serving = workers.iter().filter(|w| active(w)).count();
    // New leases that still leave extraction its share of the usable proxies.
    let leased: usize = workers.iter().map(|w| w.held.len()).sum();
    let usable = leased + free.len();
    let budget = usable
        .saturating_sub(limits.kept_for_extraction(usable))
        .saturating_sub(leased)
        .min(free.len());
    // What a cordoned worker keeps is not there to share among the others.
    let held_total: usize = workers
        .iter()
        .filter(|w| w.mode != WorkerMode::Cordoned)
        .map(|w| w.held.len())
        .sum();
    let share = (held_total + budget)
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
    for candidate in free.into_iter().take(budget) {
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

    /// Limits without a share for extraction: `per_worker_target` alone.
    fn to(per_worker_target: usize) -> Limits {
        Limits {
            per_worker_target,
            extraction_share: 0.0,
        }
    }

    fn shared(extraction_share: f64) -> Limits {
        Limits {
            per_worker_target: 100,
            extraction_share,
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
        let p = plan(&[worker("a", &[]), worker("b", &[])], &free(1..7), to(100));
        assert_eq!(p.assign.len(), 6);
        let to_a = p.assign.iter().filter(|(_, w)| w.as_str() == "a").count();
        assert_eq!(to_a, 3);
        assert!(p.drain.is_empty());
    }

    #[test]
    fn respects_the_per_worker_target() {
        let p = plan(&[worker("a", &[])], &free(1..10), to(4));
        assert_eq!(p.assign.len(), 4);
    }

    #[test]
    fn a_newcomer_gets_a_share_by_draining_the_incumbent() {
        let p = plan(
            &[worker("a", &[1, 2, 3, 4, 5, 6]), worker("b", &[])],
            &[],
            to(100),
        );
        assert_eq!(p.drain.len(), 3);
        assert!(p.drain.iter().all(|(_, w, _)| w.as_str() == "a"));
        assert!(p.assign.is_empty());
    }

    #[test]
    fn small_imbalances_do_not_flap() {
        let p = plan(
            &[worker("a", &[1, 2, 3]), worker("b", &[4, 5])],
            &[],
            to(100),
        );
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn a_draining_worker_gives_everything_back_and_gets_nothing() {
        let mut a = worker("a", &[1, 2, 3]);
        a.mode = WorkerMode::Draining;
        let p = plan(&[a, worker("b", &[])], &free(4..6), to(100));
        assert_eq!(p.drain.len(), 3);
        assert!(p.assign.iter().all(|(_, w)| w.as_str() == "b"));
        assert_eq!(p.assign.len(), 2);
    }

    #[test]
    fn a_cordoned_worker_keeps_what_it_holds_and_gets_nothing() {
        let mut a = worker("a", &[1, 2, 3, 4, 5, 6]);
        a.mode = WorkerMode::Cordoned;
        let p = plan(&[a, worker("b", &[])], &free(10..14), to(100));
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
        let p = plan(&[a, b], &free(3..4), to(100));
        assert_eq!(p.assign[0].1.as_str(), "b");
    }

    #[test]
    fn the_extraction_share_of_the_usable_proxies_stays_unowned() {
        let p = plan(&[worker("a", &[])], &free(1..11), shared(0.5));
        assert_eq!(p.assign.len(), 5, "half of 10 stays free");
        // Rounded up for extraction: of 7, 4 stay free.
        let p = plan(&[worker("a", &[])], &free(1..8), shared(0.5));
        assert_eq!(p.assign.len(), 3);
        // What the workers hold counts as usable: 4 held + 6 free, 5 kept, 1 more lease.
        let p = plan(&[worker("a", &[1, 2, 3, 4])], &free(10..16), shared(0.5));
        assert_eq!(p.assign.len(), 1);
        assert!(p.drain.is_empty());
        // A share of 1 leases nothing; 0 leases everything (up to the target).
        let p = plan(&[worker("a", &[])], &free(1..11), shared(1.0));
        assert_eq!(p, Plan::default());
        let p = plan(&[worker("a", &[])], &free(1..11), shared(0.0));
        assert_eq!(p.assign.len(), 10);
    }

    #[test]
    fn the_share_and_the_target_both_hold() {
        let limits = Limits {
            per_worker_target: 2,
            extraction_share: 0.5,
        };
        let p = plan(&[worker("a", &[])], &free(1..11), limits);
        assert_eq!(p.assign.len(), 2, "the target is the smaller bound");
        let limits = Limits {
            per_worker_target: 100,
            extraction_share: 0.8,
        };
        let p = plan(&[worker("a", &[]), worker("b", &[])], &free(1..11), limits);
        assert_eq!(p.assign.len(), 2, "the share is the smaller bound");
        let to_a = p.assign.iter().filter(|(_, w)| w.as_str() == "a").count();
        assert_eq!(to_a, 1, "and the workers split what it leaves");
    }

    #[test]
    fn extraction_using_up_its_share_takes_nothing_back_from_the_workers() {
        // 5 held, nothing free (extraction took it all): no drain, no lease.
        let p = plan(&[worker("a", &[1, 2, 3, 4, 5])], &[], shared(0.5));
        assert_eq!(p, Plan::default());
        // New proxies go to extraction until it has its share again.
        let p = plan(&[worker("a", &[1, 2, 3, 4, 5])], &free(10..15), shared(0.5));
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn a_newcomer_still_gets_a_share_of_what_the_gateways_may_hold() {
        // 10 usable, 5 for the workers: a holds them all, b gets half through a drain.
        let p = plan(
            &[worker("a", &[1, 2, 3, 4, 5]), worker("b", &[])],
            &free(10..15),
            shared(0.5),
        );
        assert!(p.assign.is_empty());
        assert_eq!(p.drain.len(), 2);
        assert!(p.drain.iter().all(|(_, w, _)| w.as_str() == "a"));
    }

    #[test]
    fn a_share_rounds_up_on_whole_proxies_not_on_floating_point_noise() {
        assert_eq!(shared(0.07).kept_for_extraction(100), 7);
        let limits = shared(0.1);
        assert_eq!(limits.kept_for_extraction(30), 3);
        assert_eq!(limits.kept_for_extraction(31), 4);
        assert_eq!(limits.kept_for_extraction(0), 0);
        assert_eq!(shared(1.0).kept_for_extraction(7), 7);
        assert_eq!(
            shared(1e-9).kept_for_extraction(7),
            1,
            "a share is never rounded away"
        );
    }
}
