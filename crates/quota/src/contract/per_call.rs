//! Limits come with each call: one instance serves callers with different limits, and a
//! limit that changes between calls applies from the next call on, in the same window.

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::{Operation, OperationLimits, QuotaDecision, QuotaPolicy};

fn extract_policy(limits: OperationLimits) -> QuotaPolicy {
    QuotaPolicy {
        operation: Operation::Extract,
        limits,
    }
}

/// `Exceeded` under `limits`, with a retry-after inside the window; panics otherwise.
fn exceeded_under(decision: &QuotaDecision, limits: OperationLimits) {
    let QuotaDecision::Exceeded {
        retry_after_ms,
        policy,
        ..
    } = *decision
    else {
        panic!("expected Exceeded, got {decision:?}");
    };
    assert_eq!(policy, extract_policy(limits));
    assert!((1..=limits.window_ms()).contains(&retry_after_ms));
}

/// `remaining` of an admission under `limits`; panics on anything else.
fn admitted_under(decision: &QuotaDecision, limits: OperationLimits) -> u32 {
    let QuotaDecision::Admitted {
        remaining, policy, ..
    } = *decision
    else {
        panic!("expected Admitted, got {decision:?}");
    };
    assert_eq!(policy, extract_policy(limits));
    remaining
}

/// Two clients of one project on the same instance, limit 2 and limit 4, calls interleaved:
/// each is admitted exactly up to its own limit, each decision reports its own policy, and
/// the stored buckets hold 2 and 4 receipts.
pub async fn clients_on_one_instance_are_charged_under_their_own_limits<F: QuotaFactory>(
    factory: &F,
) {
    let small = limits(2);
    let big = limits(4);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let small_client = format!("small-{attempt}");
        let big_client = format!("big-{attempt}");
        let mut window = OneWindow::default();
        for index in 0..6_u32 {
            let receipt = format!("r{index}");
            for (client, limits) in [(&small_client, small), (&big_client, big)] {
                let decision = consume(
                    quota,
                    &command(PROJECT, client, Operation::Extract, &receipt),
                    limits,
                )
                .await;
                window.check(&decision)?;
                if index < limits.limit() {
                    assert_eq!(
                        admitted_under(&decision, limits),
                        limits.limit() - index - 1,
                        "{client} #{index}"
                    );
                } else {
                    exceeded_under(&decision, limits);
                }
            }
        }
        for (client, limits) in [(&small_client, small), (&big_client, big)] {
            let stored = harness
                .stored(PROJECT, client, Operation::Extract)
                .await
                .expect("the bucket is stored");
            assert_eq!(stored.consumed_count, limits.limit(), "{client}");
        }
        Ok(())
    })
    .await;
}

/// Three receipts charged under limit 4, then the limit drops to 2 in the same window: a new
/// receipt is exceeded (under the new policy), the charged receipts replay as admitted with
/// nothing remaining and without a charge; back at 4, one more receipt fits.
pub async fn lowered_limit_denies_new_receipts_and_replays_stay_admitted<F: QuotaFactory>(
    factory: &F,
) {
    let before = limits(4);
    let lowered = limits(2);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let mut decide = async |receipt: &str, limits| -> Result<QuotaDecision, Crossed> {
            let decision = consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, receipt),
                limits,
            )
            .await;
            window.check(&decision)?;
            Ok(decision)
        };
        for (receipt, left) in [("a", 3), ("b", 2), ("c", 1)] {
            assert_eq!(
                admitted_under(&decide(receipt, before).await?, before),
                left
            );
        }
        exceeded_under(&decide("d", lowered).await?, lowered);
        for receipt in ["a", "c", "b"] {
            assert_eq!(
                admitted_under(&decide(receipt, lowered).await?, lowered),
                0,
                "replay of {receipt} over the lowered limit"
            );
        }
        exceeded_under(&decide("d", lowered).await?, lowered);
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(
            stored.consumed_count, 3,
            "neither replays nor denials charge"
        );
        assert_eq!(stored.receipt_ids, ["a", "b", "c"]);
        assert_eq!(admitted_under(&decide("d", before).await?, before), 0);
        exceeded_under(&decide("e", before).await?, before);
        Ok(())
    })
    .await;
}

/// A bucket full at limit 2 takes two more receipts once the limit is raised to 4 in the
/// same window, counting on from the stored count.
pub async fn raised_limit_admits_more_in_the_same_window<F: QuotaFactory>(factory: &F) {
    let before = limits(2);
    let raised = limits(4);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let mut decide = async |receipt: &str, limits| -> Result<QuotaDecision, Crossed> {
            let decision = consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, receipt),
                limits,
            )
            .await;
            window.check(&decision)?;
            Ok(decision)
        };
        assert_eq!(admitted_under(&decide("a", before).await?, before), 1);
        assert_eq!(admitted_under(&decide("b", before).await?, before), 0);
        exceeded_under(&decide("c", before).await?, before);
        assert_eq!(admitted_under(&decide("c", raised).await?, raised), 1);
        assert_eq!(admitted_under(&decide("d", raised).await?, raised), 0);
        exceeded_under(&decide("e", raised).await?, raised);
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.consumed_count, 4);
        assert_eq!(stored.receipt_ids, ["a", "b", "c", "d"]);
        Ok(())
    })
    .await;
}
