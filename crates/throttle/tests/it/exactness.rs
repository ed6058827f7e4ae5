//! Admissions over long simulated periods are exact, and retry hints are exact.

use crate::common::*;
use proxypool_throttle::{EngineOptions, InitialTokens, Reason};

/// Drains the bucket at every step of `step_ns` for `duration_ns`; returns admissions.
/// The burst must exceed one token plus one step's refill, so nothing overflows between
/// steps and the exact expectation is `burst + floor(rate × T)`.
fn admissions_while_draining(
    requests_per_second: f64,
    burst: f64,
    token_scale: u32,
    step_ns: u64,
    duration_ns: u64,
) -> u64 {
    let options = EngineOptions {
        token_scale,
        ..Default::default()
    };
    let (limiter, clock) = global_limiter(options, no_lockout(requests_per_second, burst));
    let client = ip("198.51.100.10");
    let mut admitted = 0;
    let mut elapsed = 0;
    loop {
        while limiter.check_global(client).allowed {
            admitted += 1;
        }
        if elapsed + step_ns > duration_ns {
            break;
        }
        clock.advance_ns(step_ns);
        elapsed += step_ns;
    }
    // Settle the remainder of the period so the expected value is for exactly `duration_ns`.
    clock.advance_ns(duration_ns - elapsed);
    while limiter.check_global(client).allowed {
        admitted += 1;
    }
    admitted
}

/// burst + floor(rate × T), computed in integers.
fn expected(rate_units_per_sec: u64, token_scale: u64, burst: u64, duration_ns: u64) -> u64 {
    let refilled_units = u128::from(rate_units_per_sec) * u128::from(duration_ns) / u128::from(SEC);
    burst + (refilled_units / u128::from(token_scale)) as u64
}

#[test]
fn half_a_request_per_second_for_an_hour() {
    // Odd step (997.3 ms) so every refill leaves a remainder that must be carried.
    let got = admissions_while_draining(0.5, 2.0, 1000, 997_300_000, 3600 * SEC);
    assert_eq!(got, 2 + 1800);
}

#[test]
fn one_third_per_second_with_a_matching_scale() {
    let got = admissions_while_draining(1.0 / 3.0, 2.0, 3, 333_333_337, 900 * SEC);
    assert_eq!(got, 2 + 300);
}

#[test]
fn fractional_rate_over_a_quarter_hour() {
    let got = admissions_while_draining(7.3, 5.0, 1000, 12_345_679, 900 * SEC);
    assert_eq!(got, expected(7300, 1000, 5, 900 * SEC));
    assert_eq!(got, 5 + 6570);
}

#[test]
fn two_hundred_per_second_is_not_rounded_to_a_tier() {
    let got = admissions_while_draining(200.0, 200.0, 1000, 3_000_001, 120 * SEC);
    assert_eq!(got, 200 + 24_000);
}

#[test]
fn one_hundred_thousand_per_second() {
    let got = admissions_while_draining(100_000.0, 1000.0, 1000, 777_777, 10 * SEC);
    assert_eq!(got, 1000 + 1_000_000);
}

#[test]
fn tiny_steps_lose_nothing() {
    // 1 request/s checked every 1.7 µs: each check refills 0.0017 units, far below one unit;
    // only the carried remainder makes them add up. A large initial balance keeps every
    // check admitted, so the key never escalates while the refills accumulate.
    let options = EngineOptions {
        initial_tokens: InitialTokens::Tokens(1_000_000),
        ..Default::default()
    };
    let (limiter, clock) = global_limiter(options, no_lockout(1.0, 2_000_000.0));
    let client = ip("198.51.100.15");
    let steps = 1_500_000_000 / 1_700;
    let mut admitted = 0u64;
    for _ in 0..steps {
        clock.advance_ns(1_700);
        admitted += u64::from(limiter.check_global(client).allowed);
    }
    clock.advance_ns(1_500_000_000 - steps * 1_700);
    while limiter.check_global(client).allowed {
        admitted += 1;
    }
    assert_eq!(admitted, 1_000_000 + 1);
}

#[test]
fn empty_and_numeric_initial_tokens() {
    for (initial, first_burst) in [(InitialTokens::Empty, 0), (InitialTokens::Tokens(3), 3)] {
        let options = EngineOptions {
            initial_tokens: initial,
            ..Default::default()
        };
        let (limiter, clock) = global_limiter(options, no_lockout(1.0, 5.0));
        let client = ip("198.51.100.11");
        let at_start = (0..10)
            .filter(|_| limiter.check_global(client).allowed)
            .count();
        assert_eq!(at_start, first_burst, "{initial:?}");
        clock.advance(ms(1000));
        assert!(limiter.check_global(client).allowed);
    }
}

#[test]
fn retry_after_is_exact_for_soft_denials() {
    for (rate, burst) in [
        (0.5, 1.0),
        (3.0, 2.0),
        (7.3, 1.0),
        (200.0, 10.0),
        (100_000.0, 50.0),
    ] {
        let (limiter, clock) = global_limiter(EngineOptions::default(), no_lockout(rate, burst));
        let client = ip("198.51.100.12");
        for round in 0..50u64 {
            while limiter.check_global(client).allowed {}
            let denied = limiter.check_global(client);
            assert_eq!(denied.reason, Reason::SoftThrottle);
            let retry = denied.retry_after_ms;
            assert!(retry >= 1);
            if retry > 1 {
                clock.advance(ms(retry - 1));
                let early = limiter.check_global(client);
                assert!(
                    !early.allowed,
                    "rate {rate}: admitted 1 ms before retry_after {retry}"
                );
                assert_eq!(early.retry_after_ms, 1, "rate {rate}: hint not consistent");
                clock.advance(ms(1));
            } else {
                clock.advance(ms(1));
            }
            assert!(
                limiter.check_global(client).allowed,
                "rate {rate}: denied at retry_after"
            );
            // Odd offsets so the next round starts with a non-zero carry.
            clock.advance_ns(round * 7_919 + 1);
        }
    }
}

#[test]
fn retry_after_is_exact_for_lockouts() {
    let policy = proxypool_throttle::Policy::new(10.0, 1.0)
        .with_max_soft_violations(2)
        .with_hard_lockout(ms(2500));
    let (limiter, clock) = global_limiter(EngineOptions::default(), policy);
    let client = ip("198.51.100.13");
    assert!(limiter.check_global(client).allowed);
    assert_eq!(limiter.check_global(client).reason, Reason::SoftThrottle);
    let locked = limiter.check_global(client);
    assert_eq!(
        (locked.reason, locked.retry_after_ms),
        (Reason::HardLockout, 2500)
    );
    clock.advance(ms(2499));
    let still = limiter.check_global(client);
    assert_eq!(
        (still.reason, still.retry_after_ms),
        (Reason::HardLockout, 1)
    );
    clock.advance(ms(1));
    assert!(limiter.check_global(client).allowed);
}

#[test]
fn credit_counts_whole_tokens_left() {
    let (limiter, _clock) = global_limiter(EngineOptions::default(), no_lockout(1.0, 3.5));
    let client = ip("198.51.100.14");
    let credits: Vec<u32> = (0..4)
        .map(|_| limiter.check_global(client).credit)
        .collect();
    assert_eq!(credits, vec![2, 1, 0, 0]);
}
