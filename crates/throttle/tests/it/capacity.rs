//! Bounded memory: new keys are denied at the cap, known keys keep working, sweeps evict
//! stale keys first and then the least recently seen unlocked keys, in bounded batches.

use crate::common::*;
use proxypool_throttle::{EngineOptions, Policy, Reason, ScopeName, Sweeper};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

fn client(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
}

fn capped(max_tracked: usize) -> EngineOptions {
    EngineOptions {
        max_tracked,
        shard_count: 4,
        stale_after: Duration::from_secs(60),
        cap_retry_after: ms(750),
        ..Default::default()
    }
}

#[test]
fn new_keys_are_denied_at_the_cap_and_known_keys_keep_working() {
    let (limiter, clock) = global_limiter(capped(3), no_lockout(1.0, 1.0));
    for n in 0..3 {
        assert!(limiter.check_global(client(n)).allowed);
    }
    let rejected = limiter.check_global(client(99));
    assert_eq!(
        (rejected.allowed, rejected.reason, rejected.retry_after_ms),
        (false, Reason::HardLockout, 750)
    );
    clock.advance(ms(1000));
    assert!(
        limiter.check_global(client(0)).allowed,
        "known keys are unaffected"
    );
    let engine = limiter.engine();
    assert_eq!(engine.tracked_keys(), 3);
    assert_eq!(engine.counters().rejected_at_cap, 1);
}

#[test]
fn stale_keys_are_evicted_and_make_room() {
    // Not full (3 of 4), so only staleness evicts.
    let (limiter, clock) = global_limiter(capped(4), no_lockout(1.0, 1.0));
    for n in 0..3 {
        limiter.check_global(client(n));
    }
    clock.advance(ms(59_999));
    assert!(
        limiter.check_global(client(2)).allowed,
        "keeps client 2 fresh"
    );
    assert_eq!(limiter.sweep(100).evicted(), 0, "nothing is stale yet");
    clock.advance(ms(1));
    let outcome = limiter.sweep(100);
    assert_eq!((outcome.evicted_stale, outcome.evicted_lru), (2, 0));
    assert_eq!(outcome.tracked_after, 1);
    assert!(limiter.check_global(client(99)).allowed);
    assert_eq!(limiter.engine().counters().evicted_stale, 2);
}

#[test]
fn sweeps_are_bounded_by_their_budget() {
    let (limiter, clock) = global_limiter(capped(1000), no_lockout(1.0, 1.0));
    for n in 0..100 {
        limiter.check_global(client(n));
    }
    clock.advance(Duration::from_secs(61));
    let first = limiter.sweep(30);
    assert_eq!(first.evicted_stale, 30);
    assert!(first.more_work);
    let mut total = first.evicted();
    while total < 100 {
        let next = limiter.sweep(30);
        assert!(next.evicted() <= 30);
        assert!(next.evicted() > 0, "progress on every call");
        total += next.evicted();
    }
    assert_eq!(limiter.engine().tracked_keys(), 0);
    assert!(!limiter.sweep(30).more_work);
}

#[test]
fn locked_keys_are_never_evicted_as_stale() {
    let policy = Policy::new(1.0, 1.0)
        .with_max_soft_violations(1)
        .with_hard_lockout(Duration::from_secs(600));
    let (limiter, clock) = global_limiter(capped(10), policy);
    let attacker = client(1);
    limiter.check_global(attacker);
    assert_eq!(limiter.check_global(attacker).reason, Reason::HardLockout);
    clock.advance(Duration::from_secs(120));
    assert_eq!(
        limiter.sweep(100).evicted(),
        0,
        "an idle but locked key stays"
    );
    let still = limiter.check_global(attacker);
    assert_eq!(
        (still.reason, still.retry_after_ms),
        (Reason::HardLockout, 480_000)
    );
}

#[test]
fn a_full_engine_evicts_least_recently_seen_unlocked_keys() {
    let policy = Policy::new(1.0, 1.0)
        .with_max_soft_violations(1)
        .with_hard_lockout(Duration::from_secs(600));
    let (limiter, clock) = global_limiter(capped(20), policy);
    // Client 0 gets locked first (oldest), then clients 1..20 arrive 1 s apart.
    limiter.check_global(client(0));
    limiter.check_global(client(0));
    for n in 1..20 {
        clock.advance(ms(1000));
        limiter.check_global(client(n));
    }
    assert!(!limiter.check_global(client(100)).allowed, "full");
    // Nobody is stale (60 s), so the sweep falls back to LRU: a tenth of 20 = 2 keys.
    let outcome = limiter.sweep(100);
    assert_eq!((outcome.evicted_stale, outcome.evicted_lru), (0, 2));
    assert_eq!(outcome.tracked_after, 18);
    let engine = limiter.engine();
    let global = engine.scope_id(&ScopeName::Global).unwrap();
    let tracked = |n: u32| engine.is_tracked(&engine.key(global, client(n)));
    assert!(
        tracked(0),
        "the locked key survived although it is the oldest"
    );
    assert!(
        !tracked(1) && !tracked(2),
        "the two least recently seen are gone"
    );
    assert!((3..20).all(tracked));
    assert_eq!(limiter.report(5).engine.hard_blocked, 1);
    assert!(limiter.check_global(client(100)).allowed);
}

#[test]
fn memory_stays_bounded_under_a_flood_of_new_addresses() {
    let (limiter, clock) = global_limiter(capped(500), no_lockout(1.0, 1.0));
    let mut admitted_new = 0;
    for round in 0..20u32 {
        for n in 0..1000 {
            admitted_new += u32::from(limiter.check_global(client(round * 1000 + n)).allowed);
        }
        assert!(limiter.engine().tracked_keys() <= 500);
        clock.advance(ms(100));
        while limiter.sweep(200).more_work {}
    }
    assert!(limiter.engine().peak_tracked() <= 500);
    assert!(admitted_new >= 500, "the sweeps made room: {admitted_new}");
}

#[test]
fn the_sweeper_thread_cleans_up_and_stops_on_drop() {
    let (limiter, clock) = global_limiter(capped(100), no_lockout(1.0, 1.0));
    let limiter = Arc::new(limiter);
    for n in 0..50 {
        limiter.check_global(client(n));
    }
    clock.advance(Duration::from_secs(61));
    let sweeper = Sweeper::spawn(limiter.clone(), ms(1), 10).unwrap();
    // The sweeper runs on real time; wait (bounded) for it to observe the manual clock.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while limiter.engine().tracked_keys() > 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    drop(sweeper);
    assert_eq!(limiter.engine().tracked_keys(), 0);
    assert_eq!(
        Arc::strong_count(&limiter),
        1,
        "thread ended and released the limiter"
    );
}
