//! Reports in text and JSON: options, counters, tracked and peak keys, hard-blocked count,
//! and the keys under most pressure (locked first, then largest deficit).

use crate::common::*;
use proxypool_throttle::{EngineOptions, ManualClock, Policy, PolicyLimiter};
use std::sync::Arc;

fn busy_limiter() -> (PolicyLimiter<Arc<ManualClock>>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let limiter = PolicyLimiter::builder(EngineOptions::default(), Policy::new(10.0, 10.0))
        .operation(
            "extract",
            Policy::new(1.0, 4.0)
                .with_max_soft_violations(2)
                .with_hard_lockout(ms(60_000)),
        )
        .build_with_clock(clock.clone())
        .unwrap();
    let extract = limiter.operation("extract");
    // 203.0.113.1 gets locked out; .2 uses 3 of 4 tokens; .3 uses 1; an IPv6 client empties
    // the global bucket (10 tokens).
    for _ in 0..6 {
        limiter.check(extract, ip("203.0.113.1"));
    }
    for _ in 0..3 {
        limiter.check(extract, ip("203.0.113.2"));
    }
    limiter.check(extract, ip("203.0.113.3"));
    for _ in 0..10 {
        limiter.check_global(ip("2001:db8:5:6::1"));
    }
    clock.advance(ms(250));
    (limiter, clock)
}

#[test]
fn report_ranks_locked_keys_first_then_deficit() {
    let (limiter, _clock) = busy_limiter();
    let report = limiter.report(3);
    let engine = &report.engine;
    assert_eq!(engine.tracked_keys, 4);
    assert_eq!(engine.peak_tracked, 4);
    assert_eq!(engine.hard_blocked, 1);
    assert_eq!(engine.counters.checks, 20);
    assert_eq!(engine.counters.allowed, 4 + 3 + 1 + 10);
    assert_eq!(engine.counters.soft_throttled, 1);
    assert_eq!(engine.counters.hard_locked, 1);
    let top: Vec<(&str, &str, bool)> = engine
        .top_keys
        .iter()
        .map(|k| (k.scope.as_str(), k.client.as_str(), k.locked))
        .collect();
    assert_eq!(
        top,
        vec![
            ("op:extract", "203.0.113.1", true),
            ("global", "2001:db8:5:6::/64", false),
            ("op:extract", "203.0.113.2", false),
        ]
    );
    let locked = &engine.top_keys[0];
    assert_eq!(locked.lockout_remaining_ms, 59_750);
    assert_eq!(locked.idle_ms, 250);
    let global = &engine.top_keys[1];
    assert!((global.deficit - 7.5).abs() < 1e-9, "{}", global.deficit);
    let third = &engine.top_keys[2];
    assert!((third.tokens - 1.25).abs() < 1e-9, "{}", third.tokens);
    assert!((third.deficit - 2.75).abs() < 1e-9, "{}", third.deficit);
    let scopes: Vec<(&str, usize)> = engine
        .scopes
        .iter()
        .map(|s| (s.name.as_str(), s.tracked_keys))
        .collect();
    assert_eq!(scopes, vec![("global", 1), ("op:extract", 3)]);
}

#[test]
fn text_report_is_aligned_and_complete() {
    let (limiter, _clock) = busy_limiter();
    let text = limiter.report(10).to_text();
    for expected in [
        "--- Policy limiter report ---",
        "extract",
        "--- Throttle engine report ---",
        "Tracked keys             : 4",
        "Hard blocked             : 1",
        "rejected at cap",
        "LOCKED",
        "2001:db8:5:6::/64",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    // Every row of the top-keys table has its STATE column at the same offset.
    let table: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("Top keys"))
        .skip(1)
        .collect();
    let header_offset = table[0].find("STATE").unwrap();
    for row in &table[1..] {
        let state = row.find("LOCKED").or_else(|| row.find("open")).unwrap();
        assert_eq!(state, header_offset, "misaligned row {row:?}");
    }
}

#[test]
fn json_report_carries_the_same_data() {
    let (limiter, _clock) = busy_limiter();
    let json: serde_json::Value = serde_json::from_str(&limiter.report(2).to_json()).unwrap();
    let engine = &json["engine"];
    assert_eq!(engine["tracked_keys"], 4);
    assert_eq!(engine["hard_blocked"], 1);
    assert_eq!(engine["counters"]["checks"], 20);
    assert_eq!(engine["options"]["hard_lockout_ms"], 30_000);
    assert_eq!(engine["top_keys"].as_array().unwrap().len(), 2);
    assert_eq!(engine["top_keys"][0]["locked"], true);
    assert_eq!(json["operations"][0]["scope"], "op:extract");
}

#[test]
fn an_idle_limiter_reports_no_pressure() {
    let (limiter, clock) = busy_limiter();
    clock.advance(ms(120_000));
    let report = limiter.report(10).engine;
    assert!(report.top_keys.is_empty());
    assert_eq!(report.hard_blocked, 0);
    assert!(report.to_text().contains("(none)"));
}
