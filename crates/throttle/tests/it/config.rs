//! Invalid configuration is rejected at load with a message naming the setting.

use proxypool_throttle::{ConfigError, EngineOptions, InitialTokens, Policy, PolicyLimiter};
use std::time::Duration;

fn build(global: Policy, operations: &[(&str, Policy)]) -> Result<(), ConfigError> {
    build_with(EngineOptions::default(), global, operations)
}

fn build_with(
    options: EngineOptions,
    global: Policy,
    operations: &[(&str, Policy)],
) -> Result<(), ConfigError> {
    let mut builder = PolicyLimiter::builder(options, global);
    for (name, policy) in operations {
        builder = builder.operation(*name, policy.clone());
    }
    builder.build().map(drop)
}

fn message(result: Result<(), ConfigError>) -> String {
    result
        .expect_err("configuration should be rejected")
        .to_string()
}

#[test]
fn a_valid_configuration_builds() {
    build(
        Policy::new(100.0, 200.0),
        &[
            ("extract", Policy::new(5.0, 10.0)),
            ("search", Policy::new(0.5, 2.0).with_id("read")),
            ("list", Policy::new(0.5, 2.0).with_id("read")),
        ],
    )
    .unwrap();
}

#[test]
fn a_zero_lockout_is_rejected_not_turned_into_no_lockout() {
    let text = message(build(
        Policy::new(1.0, 1.0),
        &[(
            "extract",
            Policy::new(1.0, 1.0).with_hard_lockout(Duration::ZERO),
        )],
    ));
    assert!(text.contains("op:extract"), "{text}");
    assert!(
        text.contains("hard_lockout must be at least 1 ms"),
        "{text}"
    );
    let options = EngineOptions {
        hard_lockout: Duration::from_micros(999),
        ..Default::default()
    };
    assert!(message(build_with(options, Policy::new(1.0, 1.0), &[])).contains("hard_lockout"));
}

#[test]
fn bad_rates_and_bursts_name_the_policy() {
    let cases = [
        (
            Policy::new(0.0, 1.0),
            "requests_per_second must be a finite number greater than 0",
        ),
        (
            Policy::new(1.0, 0.0),
            "burst must be a finite number greater than 0",
        ),
        (Policy::new(1.0, 0.25), "burst must be at least 1 token"),
        (
            Policy::new(0.0005, 1.0),
            "not a whole multiple of 1/token_scale",
        ),
        (Policy::new(f64::INFINITY, 1.0), "finite number"),
    ];
    for (policy, expected) in cases {
        let text = message(build(Policy::new(1.0, 1.0), &[("extract", policy.clone())]));
        assert!(text.contains(expected), "{policy:?}: {text}");
        assert!(text.contains("op:extract"), "{text}");
    }
    let text = message(build(Policy::new(-3.0, 1.0), &[]));
    assert!(text.contains("\"global\""), "{text}");
}

#[test]
fn shared_ids_must_agree() {
    let text = message(build(
        Policy::new(1.0, 1.0),
        &[
            ("search", Policy::new(1.0, 5.0).with_id("read")),
            ("list", Policy::new(2.0, 5.0).with_id("read")),
        ],
    ));
    assert!(text.contains("\"read\""), "{text}");
    assert!(
        text.contains("\"search\"") && text.contains("\"list\""),
        "{text}"
    );
    // Same limits spelled differently (default lockout explicitly) are the same policy.
    build(
        Policy::new(1.0, 1.0),
        &[
            ("search", Policy::new(1.0, 5.0).with_id("read")),
            (
                "list",
                Policy::new(1.0, 5.0)
                    .with_id("read")
                    .with_hard_lockout(Duration::from_secs(30)),
            ),
        ],
    )
    .unwrap();
}

#[test]
fn names_and_duplicates_are_checked() {
    let dup = message(build(
        Policy::new(1.0, 1.0),
        &[("x", Policy::new(1.0, 1.0)), ("x", Policy::new(2.0, 1.0))],
    ));
    assert!(dup.contains("configured twice"), "{dup}");
    assert!(
        message(build(Policy::new(1.0, 1.0), &[("", Policy::new(1.0, 1.0))]))
            .contains("operation name")
    );
    assert!(
        message(build(
            Policy::new(1.0, 1.0),
            &[("a b", Policy::new(1.0, 1.0))]
        ))
        .contains("operation name")
    );
    assert!(
        message(build(
            Policy::new(1.0, 1.0),
            &[("x", Policy::new(1.0, 1.0).with_id(""))]
        ))
        .contains("policy id")
    );
}

#[test]
fn engine_options_are_checked_before_use() {
    let options = EngineOptions {
        initial_tokens: InitialTokens::Tokens(10),
        ..Default::default()
    };
    let text = message(build_with(options, Policy::new(1.0, 5.0), &[]));
    assert!(
        text.contains("initial_tokens = 10 exceeds the burst 5"),
        "{text}"
    );
    let options = EngineOptions {
        shard_count: 100,
        ..Default::default()
    };
    assert!(message(build_with(options, Policy::new(1.0, 1.0), &[])).contains("power of two"));
}

#[test]
fn policies_load_from_json_config() {
    let global: Policy =
        serde_json::from_str(r#"{"requests_per_second": 20, "burst": 40}"#).unwrap();
    let extract: Policy = serde_json::from_str(
        r#"{"requests_per_second": 0.5, "burst": 1, "hard_lockout_ms": 60000, "max_soft_violations": 3}"#,
    )
    .unwrap();
    build(global, &[("extract", extract)]).unwrap();
    let unknown = serde_json::from_str::<Policy>(
        r#"{"requests_per_second": 1, "burst": 1, "cooldown_reset_sec": 5}"#,
    );
    assert!(unknown.is_err(), "unknown fields are rejected, not ignored");
}
