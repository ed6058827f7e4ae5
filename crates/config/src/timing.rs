//! The timing relationships that keep gateways serving through a leader failover.
//!
//! Only the leader controller renews the gateways' ownership leases. When it dies just
//! before a round would have renewed them, each lease has `ownership.renew_before` left,
//! and in that time a standby must take the leader lease, run an ownership round, renew,
//! and the gateway must learn the new lease end from a snapshot. Written out:
//!
//! ```text
//! renew_before >= leader_lease x 1.1      a dead leader's lease lapses, and the standby's
//!                                         attempt lands (it retries every tenth of the lease)
//!               + ownership.interval      the new leader's first ownership round starts
//!               + 2 x call_timeout        that round reads the workers and renews
//!               + snapshot.poll_interval  a waiting long-poll sees the renewal in the store
//!               + 1s                      the gateway switches controllers and applies the
//!                                         snapshot, and its 250 ms clock-skew cutoff margin
//! ```
//!
//! With the defaults (10 s, 1 s, 500 ms, 1 s) that is 15 s against `renew_before = 20s`.
//! The rule matters only with a shared store: the embedded one has a single controller.

use crate::duration::Millis;
use crate::model::Config;

/// The fixed part of [`failover_renew_before`]: the gateway's switch to another controller
/// (its first retry), applying the snapshot, and the 250 ms skew margin before a lease end.
pub const GATEWAY_ALLOWANCE: Millis = Millis(1_000);

/// The terms of the rule, in the order of the module doc: takeover (leader lease x 1.1),
/// the first ownership round, its two store calls, the long-poll's re-read, the gateway.
fn failover_terms(config: &Config) -> [Millis; 5] {
    let leader_lease = config.store.leader_lease.0;
    [
        Millis(leader_lease.saturating_add(leader_lease / 10)),
        config.ownership.interval,
        Millis(config.store.call_timeout.0.saturating_mul(2)),
        config.snapshot.poll_interval,
        GATEWAY_ALLOWANCE,
    ]
}

/// The shortest `ownership.renew_before` with which a standby renews every gateway lease
/// before it comes due, for this configuration's other timings (see the module doc).
pub fn failover_renew_before(config: &Config) -> Millis {
    Millis(
        failover_terms(config)
            .iter()
            .fold(0u64, |sum, term| sum.saturating_add(term.0)),
    )
}

/// The error for a `renew_before` below [`failover_renew_before`], with the sum spelled out
/// so the operator sees which setting to move.
pub fn failover_problem(config: &Config) -> Option<String> {
    let needed = failover_renew_before(config);
    let renew_before = config.ownership.renew_before;
    let [takeover, interval, calls, poll, gateway] = failover_terms(config);
    (renew_before < needed).then(|| {
        format!(
            "is {renew_before} but must be at least {needed} with a shared store, so a standby \
             controller renews the gateways' leases before they come due when the leader dies: \
             store.leader_lease x 1.1 ({takeover}) + ownership.interval ({interval}) + \
             2 x store.call_timeout ({calls}) + snapshot.poll_interval ({poll}) + {gateway} \
             for the gateway; raise renew_before (and ownership.lease with it) or shorten the \
             others"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_leave_a_margin() {
        let config = Config::default();
        let needed = failover_renew_before(&config);
        assert_eq!(needed, Millis(15_000));
        assert!(config.ownership.renew_before.0 >= needed.0 + 5_000);
        assert_eq!(failover_problem(&config), None);
    }

    #[test]
    fn each_term_counts() {
        let base = failover_renew_before(&Config::default()).0;
        let mut config = Config::default();
        config.store.leader_lease = Millis(20_000);
        assert_eq!(failover_renew_before(&config).0, base + 11_000);
        let mut config = Config::default();
        config.store.call_timeout = Millis(1_500);
        assert_eq!(failover_renew_before(&config).0, base + 2_000);
        let mut config = Config::default();
        config.ownership.interval = Millis(3_000);
        config.snapshot.poll_interval = Millis(2_000);
        assert_eq!(failover_renew_before(&config).0, base + 3_000);
    }

    #[test]
    fn a_short_renew_before_is_explained() {
        let mut config = Config::default();
        config.ownership.renew_before = Millis(10_000);
        let message = failover_problem(&config).expect("10s is too short");
        assert!(message.contains("at least 15s"), "{message}");
        assert!(
            message.contains("store.leader_lease x 1.1 (11s)"),
            "{message}"
        );
    }
}
