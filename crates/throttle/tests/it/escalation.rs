//! Soft violations escalate to a hard lockout, lockouts expire, admissions reset the count.

use crate::common::*;
use proxypool_throttle::{EngineOptions, Policy, Reason};

fn strict() -> Policy {
    // 1 request/s, no burst beyond one, lock for 10 s after 3 close denials.
    Policy::new(1.0, 1.0)
        .with_max_soft_violations(3)
        .with_hard_lockout(ms(10_000))
}

#[test]
fn repeated_denials_lock_the_key_out_and_the_lock_expires() {
    let (limiter, clock) = global_limiter(EngineOptions::default(), strict());
    let client = ip("192.0.2.1");
    assert!(limiter.check_global(client).allowed);
    let reasons: Vec<Reason> = (0..3)
        .map(|_| limiter.check_global(client).reason)
        .collect();
    assert_eq!(
        reasons,
        vec![
            Reason::SoftThrottle,
            Reason::SoftThrottle,
            Reason::HardLockout
        ]
    );
    // Locked: even with tokens back (after 5 s), every check is denied hard.
    clock.advance(ms(5_000));
    let locked = limiter.check_global(client);
    assert_eq!(
        (locked.reason, locked.retry_after_ms),
        (Reason::HardLockout, 5_000)
    );
    assert_eq!(
        locked.credit, 0,
        "tokens refilled during the lockout are out of reach"
    );
    clock.advance(ms(5_000));
    let after = limiter.check_global(client);
    assert!(after.allowed, "{after:?}");
    let report = limiter.report(5).engine;
    assert_eq!(report.counters.hard_locked, 2);
    assert_eq!(report.counters.soft_throttled, 2);
    assert_eq!(report.counters.allowed, 2);
}

#[test]
fn an_admission_resets_the_violation_count() {
    let (limiter, clock) = global_limiter(EngineOptions::default(), strict());
    let client = ip("192.0.2.2");
    for _ in 0..10 {
        assert!(limiter.check_global(client).allowed);
        assert_eq!(limiter.check_global(client).reason, Reason::SoftThrottle);
        assert_eq!(limiter.check_global(client).reason, Reason::SoftThrottle);
        clock.advance(ms(1000));
    }
}

#[test]
fn denials_spread_wider_than_the_window_never_lock() {
    let options = EngineOptions {
        soft_violation_window: ms(500),
        ..Default::default()
    };
    let (limiter, clock) =
        global_limiter(options, Policy::new(0.01, 1.0).with_max_soft_violations(2));
    let client = ip("192.0.2.3");
    assert!(limiter.check_global(client).allowed);
    for _ in 0..20 {
        assert_eq!(limiter.check_global(client).reason, Reason::SoftThrottle);
        clock.advance(ms(501));
    }
    // Two denials inside the window do lock.
    assert_eq!(limiter.check_global(client).reason, Reason::SoftThrottle);
    clock.advance(ms(500));
    assert_eq!(limiter.check_global(client).reason, Reason::HardLockout);
}

#[test]
fn engine_defaults_apply_to_policies_without_their_own() {
    let options = EngineOptions {
        max_soft_violations: 1,
        hard_lockout: ms(1234),
        ..Default::default()
    };
    let (limiter, _clock) = global_limiter(options, Policy::new(1000.0, 1.0));
    let client = ip("192.0.2.4");
    assert!(limiter.check_global(client).allowed);
    let locked = limiter.check_global(client);
    assert_eq!(
        (locked.reason, locked.retry_after_ms),
        (Reason::HardLockout, 1234)
    );
}

#[test]
fn lockouts_are_per_key() {
    let (limiter, _clock) = global_limiter(EngineOptions::default(), strict());
    let noisy = ip("192.0.2.5");
    for _ in 0..4 {
        limiter.check_global(noisy);
    }
    assert_eq!(limiter.check_global(noisy).reason, Reason::HardLockout);
    assert!(limiter.check_global(ip("192.0.2.6")).allowed);
}

#[test]
fn a_flood_from_a_locked_client_is_answered_and_counted_exactly() {
    let (limiter, clock) = global_limiter(EngineOptions::default(), strict());
    let client = ip("192.0.2.7");
    for _ in 0..4 {
        limiter.check_global(client);
    }
    // Locked at t = 0 for 10 s. Flood it (most of these take the lock-free path).
    for step in 0..1000u64 {
        clock.set(ms(step * 9));
        let d = limiter.check_global(client);
        assert_eq!(d.reason, Reason::HardLockout);
        assert_eq!(
            d.retry_after_ms,
            10_000 - step * 9,
            "exact hint at {} ms",
            step * 9
        );
    }
    let counters = limiter.engine().counters();
    assert_eq!(counters.checks, 1004);
    assert_eq!(counters.hard_locked, 1001);
    let report = limiter.report(1).engine;
    assert_eq!(report.counters, counters);
    assert_eq!(report.hard_blocked, 1);
    clock.set(ms(10_000));
    assert!(limiter.check_global(client).allowed);
}
