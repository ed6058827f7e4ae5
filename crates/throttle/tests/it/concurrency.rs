//! Threads hammering one key never get more than `burst + rate × T` admissions, the cap
//! holds under concurrent inserts, and counters add up.

use crate::common::*;
use proxypool_throttle::{EngineOptions, ManualClock, Policy, PolicyLimiter};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

/// Runs `workers` threads checking one key while a driver thread advances the manual clock
/// by `step_ns` until `duration_ns`. Returns (admitted, checks).
fn hammer(
    limiter: &PolicyLimiter<Arc<ManualClock>>,
    clock: &ManualClock,
    workers: usize,
    step_ns: u64,
    duration_ns: u64,
) -> (u64, u64) {
    let admitted = AtomicU64::new(0);
    let checks = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let client = ip("192.0.2.77");
    thread::scope(|scope| {
        for worker in 0..workers {
            let (admitted, checks, done) = (&admitted, &checks, &done);
            scope.spawn(move || {
                // Half the workers use the per-connection cache, half the plain path: both
                // must land in the same bucket.
                let mut connection = limiter.connection(client);
                while !done.load(Ordering::Acquire) {
                    let decision = if worker % 2 == 0 {
                        connection.check(limiter, None)
                    } else {
                        limiter.check_global(client)
                    };
                    checks.fetch_add(1, Ordering::Relaxed);
                    if decision.allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        scope.spawn(|| {
            while clock.now_ns_for_tests() < duration_ns {
                clock.advance_ns(step_ns.min(duration_ns - clock.now_ns_for_tests()));
                // Give the workers a moment at each step so both drained and refilled
                // buckets are exercised.
                for _ in 0..200 {
                    std::hint::spin_loop();
                }
            }
            done.store(true, Ordering::Release);
        });
    });
    (admitted.into_inner(), checks.into_inner())
}

trait NowForTests {
    fn now_ns_for_tests(&self) -> u64;
}

impl NowForTests for ManualClock {
    fn now_ns_for_tests(&self) -> u64 {
        use proxypool_throttle::Clock;
        self.now_ns()
    }
}

#[test]
fn threads_hammering_one_key_never_exceed_burst_plus_rate_times_t() {
    for (rate, burst, workers) in [
        (1000.0, 20.0, 4),
        (0.5, 3.0, 3),
        (100_000.0, 100.0, 2),
        (7.3, 1.0, 4),
    ] {
        let (limiter, clock) = global_limiter(EngineOptions::default(), no_lockout(rate, burst));
        let duration_ns = 30 * SEC;
        let (admitted, checks) = hammer(&limiter, &clock, workers, 7 * MS + 3, duration_ns);
        let bound = burst as u64 + (rate * 30.0).floor() as u64;
        assert!(
            admitted <= bound,
            "rate {rate} burst {burst}: {admitted} admitted > bound {bound}"
        );
        assert!(
            admitted >= burst as u64,
            "rate {rate}: only {admitted} admitted"
        );
        assert!(
            checks > admitted,
            "the key was actually hammered past its limit"
        );
        let counters = limiter.engine().counters();
        assert_eq!(counters.checks, checks);
        assert_eq!(counters.allowed, admitted);
    }
}

/// A clock whose cheap reading lags the manual time by up to 3 ms (it snaps down to a
/// 3 ms grid), like a coarse clock whose ticker is late.
#[derive(Debug)]
struct LaggingClock(Arc<ManualClock>);

impl proxypool_throttle::Clock for LaggingClock {
    fn now_ns(&self) -> u64 {
        self.0.now_ns_for_tests()
    }

    fn recent_ns(&self) -> u64 {
        let now = self.0.now_ns_for_tests();
        now - now % (3 * MS)
    }

    fn recent_lag_ns(&self) -> u64 {
        3 * MS
    }
}

#[test]
fn a_lagging_cheap_clock_never_admits_more() {
    for (rate, burst) in [(1000.0, 20.0), (100_000.0, 100.0), (7.3, 1.0)] {
        let manual = Arc::new(ManualClock::new());
        let limiter = PolicyLimiter::builder(EngineOptions::default(), no_lockout(rate, burst))
            .build_with_clock(LaggingClock(manual.clone()))
            .unwrap();
        let admitted = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        let client = ip("192.0.2.78");
        thread::scope(|scope| {
            for _ in 0..3 {
                let (limiter, admitted, done) = (&limiter, &admitted, &done);
                scope.spawn(move || {
                    while !done.load(Ordering::Acquire) {
                        if limiter.check_global(client).allowed {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            scope.spawn(|| {
                while manual.now_ns_for_tests() < 20 * SEC {
                    manual.advance_ns(MS + 7);
                    for _ in 0..200 {
                        std::hint::spin_loop();
                    }
                }
                done.store(true, Ordering::Release);
            });
        });
        let elapsed_s = manual.now_ns_for_tests() as f64 / SEC as f64;
        let bound = burst as u64 + (rate * elapsed_s).floor() as u64;
        let admitted = admitted.into_inner();
        assert!(admitted <= bound, "rate {rate}: {admitted} > {bound}");
        assert!(admitted >= burst as u64);
    }
}

#[test]
fn with_escalation_the_bound_still_holds() {
    let policy = Policy::new(500.0, 50.0)
        .with_max_soft_violations(3)
        .with_hard_lockout(ms(200));
    let (limiter, clock) = global_limiter(EngineOptions::default(), policy);
    let (admitted, _) = hammer(&limiter, &clock, 4, 5 * MS, 20 * SEC);
    assert!(admitted <= 50 + 500 * 20, "{admitted}");
    assert!(
        limiter.engine().counters().hard_locked > 0,
        "lockouts happened"
    );
}

#[test]
fn concurrent_new_keys_never_exceed_the_cap() {
    let options = EngineOptions {
        max_tracked: 100,
        shard_count: 8,
        ..Default::default()
    };
    let (limiter, _clock) = global_limiter(options, no_lockout(1.0, 1.0));
    let admitted = AtomicU64::new(0);
    thread::scope(|scope| {
        for worker in 0..4u32 {
            let (limiter, admitted) = (&limiter, &admitted);
            scope.spawn(move || {
                for n in 0..1000u32 {
                    let client = IpAddr::V4(Ipv4Addr::from((worker << 16) | n));
                    if limiter.check_global(client).allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    assert!(limiter.engine().tracked_keys() <= 100);
                }
            });
        }
    });
    assert_eq!(
        admitted.into_inner(),
        100,
        "exactly the cap's worth of new keys admitted"
    );
    assert_eq!(limiter.engine().tracked_keys(), 100);
    assert_eq!(limiter.engine().peak_tracked(), 100);
    assert_eq!(limiter.engine().counters().rejected_at_cap, 3900);
}

#[test]
fn many_keys_in_parallel_are_each_exact() {
    let (limiter, clock) = global_limiter(EngineOptions::default(), no_lockout(2.0, 5.0));
    thread::scope(|scope| {
        for worker in 0..4u32 {
            let limiter = &limiter;
            scope.spawn(move || {
                for n in 0..200u32 {
                    let client = IpAddr::V4(Ipv4Addr::from(0xc000_0000 | (worker << 8) | n));
                    let admitted = (0..10)
                        .filter(|_| limiter.check_global(client).allowed)
                        .count();
                    assert_eq!(admitted, 5);
                }
            });
        }
    });
    clock.advance(ms(500));
    assert!(
        limiter
            .check_global(IpAddr::V4(Ipv4Addr::from(0xc000_0000u32)))
            .allowed
    );
    assert_eq!(limiter.engine().tracked_keys(), 800);
}
