//! The answer to a [`crate::QuotaCommand`], and the strict checks a store's row must pass to
//! become one.
//!
//! Every backend (SQL or memory) reports what it saw as a [`BucketRow`] and lets this module
//! decide: a row that breaks an invariant becomes [`QuotaDecision::Unavailable`] rather than
//! an admission computed from nonsense. Keeping the checks in one place is what makes the
//! backends agree on the edge cases.

use crate::config::{OperationLimits, QuotaPolicy};
use crate::unavailable::UnavailableReason;

/// What the quota says about one command.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaDecision {
    /// Go ahead. A replayed receipt is admitted again without a second charge.
    Admitted {
        /// Whether this decision charged the receipt (false: a replay of a receipt already
        /// charged in the window). Only a decision that charged may settle the charge
        /// ([`crate::QuotaPort::settle`]); settling a replay would undo someone else's.
        charged: bool,
        /// Admissions left in this window after this one.
        remaining: u32,
        /// When the window ends (store clock, ms since the Unix epoch).
        reset_at_ms: u64,
        /// The store clock when it decided (ms since the Unix epoch).
        observed_at_ms: u64,
        /// The operation and limits the decision was made under.
        policy: QuotaPolicy,
    },
    /// The window is full: try again after `retry_after_ms` (at least 1, at most the window).
    Exceeded {
        /// Milliseconds until the window ends, by the store's clock.
        retry_after_ms: u64,
        /// When the window ends (store clock, ms since the Unix epoch).
        reset_at_ms: u64,
        /// The operation and limits the decision was made under.
        policy: QuotaPolicy,
    },
    /// No trustworthy answer: fail closed (the API answers 503). The reason is for logs and
    /// metrics, never for the client.
    Unavailable {
        /// Why.
        reason: UnavailableReason,
    },
}

impl QuotaDecision {
    /// Whether the command may proceed.
    pub fn is_admitted(&self) -> bool {
        matches!(self, QuotaDecision::Admitted { .. })
    }

    /// The end of the window the decision was made in (`None` when Unavailable).
    pub fn reset_at_ms(&self) -> Option<u64> {
        match *self {
            QuotaDecision::Admitted { reset_at_ms, .. }
            | QuotaDecision::Exceeded { reset_at_ms, .. } => Some(reset_at_ms),
            QuotaDecision::Unavailable { .. } => None,
        }
    }

    /// The charge this decision made, for [`crate::QuotaPort::settle`]: `None` for a replay,
    /// a denial or an unavailable store.
    pub fn charge(&self, command: &crate::QuotaCommand) -> Option<crate::Charge> {
        match *self {
            QuotaDecision::Admitted {
                charged: true,
                reset_at_ms,
                policy,
                ..
            } => Some(crate::Charge {
                command: command.clone(),
                window_started_at_ms: reset_at_ms.saturating_sub(policy.limits.window_ms()),
                limits: policy.limits,
            }),
            _ => None,
        }
    }

    /// Shorthand for [`QuotaDecision::Unavailable`].
    pub fn unavailable(reason: UnavailableReason) -> Self {
        QuotaDecision::Unavailable { reason }
    }
}

/// A bucket as a store reported it, in the store's own integer types. `reset_at_ms` is
/// `window_started_at_ms + window_ms`, `observed_at_ms` the store clock at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BucketRow {
    pub(crate) consumed_count: i64,
    pub(crate) receipt_count: i64,
    pub(crate) reset_at_ms: i64,
    pub(crate) observed_at_ms: i64,
}

/// What the follow-up read of a full bucket means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FullBucket {
    /// A decision: `Exceeded`, or `Unavailable` for a malformed row.
    Decided(QuotaDecision),
    /// The bucket changed since the decision statement (its window ended, or another
    /// request reset it): decide again.
    Changed,
}

fn malformed() -> QuotaDecision {
    QuotaDecision::unavailable(UnavailableReason::MalformedResult)
}

/// Invariants every reported row must hold whatever the path. A count of 0 is sound: a
/// settled charge can leave a bucket empty within its window.
fn sound(row: &BucketRow, window_ms: i64) -> bool {
    let max = i64::from(OperationLimits::MAX_LIMIT);
    row.consumed_count == row.receipt_count
        && (0..=max).contains(&row.consumed_count)
        && row.observed_at_ms >= 0
        && row.reset_at_ms <= row.observed_at_ms.saturating_add(window_ms)
}

/// The row the decision statement returned: the bucket after it admitted the command.
///
/// Requires `1 <= count <= MAX_LIMIT` and `observed < reset <= observed + window`.
///
/// The count may exceed this call's limit: limits come with each call, so a bucket filled
/// under a higher limit can be replayed under a lower one. The statements only charge a
/// new receipt below the call's limit, so such a row is a replay, admitted with nothing
/// remaining; the hard cap (which no limit exceeds, and the tables' CHECK enforces) is
/// what still tells a corrupt count apart.
pub(crate) fn admitted(row: BucketRow, policy: QuotaPolicy, charged: bool) -> QuotaDecision {
    let limit = i64::from(policy.limits.limit());
    let window_ms = i64::try_from(policy.limits.window_ms()).unwrap_or(i64::MAX);
    // The row holds the receipt just admitted, so it holds at least one.
    if !sound(&row, window_ms) || row.consumed_count < 1 || row.reset_at_ms <= row.observed_at_ms {
        return malformed();
    }
    // All conversions hold after the checks above (0 <= remaining <= 1000, times >= 0).
    let (Ok(remaining), Ok(reset_at_ms), Ok(observed_at_ms)) = (
        u32::try_from((limit - row.consumed_count).max(0)),
        u64::try_from(row.reset_at_ms),
        u64::try_from(row.observed_at_ms),
    ) else {
        return malformed();
    };
    QuotaDecision::Admitted {
        charged,
        remaining,
        reset_at_ms,
        observed_at_ms,
        policy,
    }
}

/// The follow-up read after the decision statement admitted nothing (the bucket was full).
pub(crate) fn full(row: BucketRow, policy: QuotaPolicy) -> FullBucket {
    let limit = i64::from(policy.limits.limit());
    let window_ms = i64::try_from(policy.limits.window_ms()).unwrap_or(i64::MAX);
    if !sound(&row, window_ms) {
        return FullBucket::Decided(malformed());
    }
    if row.reset_at_ms <= row.observed_at_ms || row.consumed_count < limit {
        return FullBucket::Changed;
    }
    let (Ok(retry_after_ms), Ok(reset_at_ms)) = (
        u64::try_from(row.reset_at_ms - row.observed_at_ms),
        u64::try_from(row.reset_at_ms),
    ) else {
        return FullBucket::Decided(malformed());
    };
    FullBucket::Decided(QuotaDecision::Exceeded {
        retry_after_ms,
        reset_at_ms,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::command::Operation;

    fn policy(limit: u32) -> QuotaPolicy {
        QuotaPolicy {
            operation: Operation::Extract,
            limits: OperationLimits::new(Duration::from_secs(60), limit).unwrap(),
        }
    }

    fn row(count: i64, reset: i64, observed: i64) -> BucketRow {
        BucketRow {
            consumed_count: count,
            receipt_count: count,
            reset_at_ms: reset,
            observed_at_ms: observed,
        }
    }

    #[test]
    fn admitted_row_within_bounds() {
        let decision = admitted(row(3, 120_000, 61_000), policy(5), true);
        assert_eq!(
            decision,
            QuotaDecision::Admitted {
                charged: true,
                remaining: 2,
                reset_at_ms: 120_000,
                observed_at_ms: 61_000,
                policy: policy(5)
            }
        );
        // The last admission of a window leaves 0.
        assert!(matches!(
            admitted(row(5, 120_000, 119_999), policy(5), true),
            QuotaDecision::Admitted { remaining: 0, .. }
        ));
    }

    #[test]
    fn admitted_rejects_broken_rows() {
        let unavailable = malformed();
        for bad in [
            row(0, 120_000, 61_000),    // count below 1 (the admitted receipt is missing)
            row(1001, 120_000, 61_000), // count above the hard cap
            row(3, 61_000, 61_000),     // reset not after observed
            row(3, 181_001, 121_000),   // reset more than a window ahead
            row(3, 120_000, -1),        // negative clock
            BucketRow {
                receipt_count: 2,
                ..row(3, 120_000, 61_000)
            }, // receipts disagree with the count
        ] {
            assert_eq!(admitted(bad, policy(5), true), unavailable, "{bad:?}");
        }
    }

    #[test]
    fn admitted_over_a_lowered_limit_is_a_replay_with_nothing_remaining() {
        // Six charged under an earlier, higher limit; this call's limit is 5.
        assert_eq!(
            admitted(row(6, 120_000, 61_000), policy(5), false),
            QuotaDecision::Admitted {
                charged: false,
                remaining: 0,
                reset_at_ms: 120_000,
                observed_at_ms: 61_000,
                policy: policy(5)
            }
        );
        assert!(matches!(
            admitted(row(1000, 120_000, 61_000), policy(1), false),
            QuotaDecision::Admitted { remaining: 0, .. }
        ));
    }

    #[test]
    fn full_row_gives_retry_after_or_asks_again() {
        assert_eq!(
            full(row(5, 120_000, 118_750), policy(5)),
            FullBucket::Decided(QuotaDecision::Exceeded {
                retry_after_ms: 1_250,
                reset_at_ms: 120_000,
                policy: policy(5)
            })
        );
        // A window that ended between the statements, or a bucket reset by someone else.
        assert_eq!(
            full(row(5, 120_000, 120_000), policy(5)),
            FullBucket::Changed
        );
        assert_eq!(
            full(row(1, 180_000, 121_000), policy(5)),
            FullBucket::Changed
        );
        // Emptied by refunds since the decision: sound, and no longer full.
        assert_eq!(
            full(row(0, 120_000, 100_000), policy(5)),
            FullBucket::Changed
        );
        // Over the limit (the limit was lowered mid-window) is still just full.
        assert!(matches!(
            full(row(9, 120_000, 100_000), policy(5)),
            FullBucket::Decided(QuotaDecision::Exceeded {
                retry_after_ms: 20_000,
                ..
            })
        ));
        assert_eq!(
            full(row(5, 200_000, 100_000), policy(5)),
            FullBucket::Decided(malformed())
        );
    }
}
