//! Keys are (policy id or operation, client IP without port); IPv6 by prefix; shared ids
//! share buckets; traffic without a policy uses the global limiter.

use crate::common::*;
use proxypool_throttle::{AddressAggregation, EngineOptions, ManualClock, PolicyLimiter, Reason};
use std::net::SocketAddr;
use std::sync::Arc;

fn limiter() -> PolicyLimiter<Arc<ManualClock>> {
    PolicyLimiter::builder(EngineOptions::default(), no_lockout(1.0, 1.0))
        .operation("extract", no_lockout(1.0, 1.0))
        .operation("search", no_lockout(1.0, 1.0).with_id("read"))
        .operation("list", no_lockout(1.0, 1.0).with_id("read"))
        .build_with_clock(Arc::new(ManualClock::new()))
        .unwrap()
}

#[test]
fn the_port_is_never_part_of_the_key() {
    let limiter = limiter();
    let extract = limiter.operation("extract");
    let first: SocketAddr = "203.0.113.9:40000".parse().unwrap();
    let reconnected: SocketAddr = "203.0.113.9:40001".parse().unwrap();
    assert!(limiter.check(extract, first.ip()).allowed);
    assert!(!limiter.check(extract, reconnected.ip()).allowed);
}

#[test]
fn ipv4_addresses_are_separate_and_mapped_forms_are_the_same_client() {
    let limiter = limiter();
    let extract = limiter.operation("extract");
    assert!(limiter.check(extract, ip("203.0.113.1")).allowed);
    assert!(limiter.check(extract, ip("203.0.113.2")).allowed);
    assert!(!limiter.check(extract, ip("::ffff:203.0.113.1")).allowed);
}

#[test]
fn ipv6_clients_are_grouped_by_slash_64_by_default() {
    let limiter = limiter();
    let extract = limiter.operation("extract");
    assert!(limiter.check(extract, ip("2001:db8:aa:1::1")).allowed);
    // Rotating the interface identifier does not help...
    assert!(
        !limiter
            .check(extract, ip("2001:db8:aa:1:dead:beef:0:7"))
            .allowed
    );
    // ...another /64 is another client.
    assert!(limiter.check(extract, ip("2001:db8:aa:2::1")).allowed);
}

#[test]
fn ipv6_aggregation_is_configurable() {
    let options = EngineOptions {
        aggregation: AddressAggregation {
            ipv4_prefix: 32,
            ipv6_prefix: 128,
        },
        ..Default::default()
    };
    let (limiter, _clock) = global_limiter(options, no_lockout(1.0, 1.0));
    assert!(limiter.check_global(ip("2001:db8::1")).allowed);
    assert!(limiter.check_global(ip("2001:db8::2")).allowed);
    assert!(!limiter.check_global(ip("2001:db8::1")).allowed);
}

#[test]
fn operations_with_a_shared_policy_id_share_buckets() {
    let limiter = limiter();
    let client = ip("203.0.113.20");
    assert!(limiter.check(limiter.operation("search"), client).allowed);
    let shared = limiter.check(limiter.operation("list"), client);
    assert_eq!(shared.reason, Reason::SoftThrottle);
    // Other operations and the global limiter are independent.
    assert!(limiter.check(limiter.operation("extract"), client).allowed);
    assert!(limiter.check_global(client).allowed);
}

#[test]
fn unknown_operations_fall_back_to_the_global_limiter() {
    let limiter = limiter();
    let client = ip("203.0.113.21");
    assert!(limiter.check_operation("no-such-op", client).allowed);
    assert!(!limiter.check_global(client).allowed);
    assert!(limiter.operation("no-such-op").is_none());
}

#[test]
fn connection_cache_and_resolved_keys_share_state_with_plain_checks() {
    let limiter = limiter();
    let client = ip("203.0.113.22");
    let extract = limiter.operation("extract");
    let mut connection = limiter.connection(client);
    assert_eq!(connection.ip(), client);
    assert!(connection.check(&limiter, extract).allowed);
    assert!(!limiter.check(extract, client).allowed);
    assert!(!connection.check(&limiter, extract).allowed);
    let key = limiter.key(extract, client);
    assert!(!limiter.check_key(&key).allowed);
    // The global scope through the same connection cache is separate.
    assert!(connection.check(&limiter, None).allowed);
    assert_eq!(limiter.engine().tracked_keys(), 2);
}

#[test]
fn a_connection_cache_moved_to_another_limiter_does_not_mix_scopes() {
    let first = limiter();
    let second = limiter();
    let client = ip("203.0.113.23");
    let mut connection = first.connection(client);
    assert!(connection.check(&first, first.operation("extract")).allowed);
    assert!(
        connection
            .check(&second, second.operation("extract"))
            .allowed
    );
    assert!(
        !connection
            .check(&second, second.operation("extract"))
            .allowed
    );
}

#[test]
fn a_global_policy_with_an_id_shares_buckets_with_operations_naming_it() {
    let limiter = PolicyLimiter::builder(
        EngineOptions::default(),
        no_lockout(1.0, 1.0).with_id("shared"),
    )
    .operation("status", no_lockout(1.0, 1.0).with_id("shared"))
    .build_with_clock(Arc::new(ManualClock::new()))
    .unwrap();
    let client = ip("203.0.113.30");
    assert!(limiter.check_global(client).allowed);
    assert!(!limiter.check(limiter.operation("status"), client).allowed);
    let report = limiter.report(0);
    assert_eq!(report.operations[0].scope, "policy:shared");
}
