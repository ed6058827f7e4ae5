//! Fixed windows: aligned to multiples of their length, reset when they end.

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::{Operation, QuotaConfig, QuotaDecision};

/// Every window starts at a multiple of its length (on the store's clock): the reset is a
/// multiple of the window, the observation lies inside `[reset - window, reset)`, and the
/// stored start is `reset - window`.
pub async fn windows_are_aligned_to_their_length<F: QuotaFactory>(factory: &F) {
    let config = QuotaConfig::default()
        .with(Operation::Extract, limits_in(1, 10))
        .with(Operation::Inspect, limits_in(7, 10))
        .with(Operation::Admin, limits_in(300, 10));
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    for operation in Operation::ALL {
        let window_ms = config.limits(operation).window_ms();
        in_one_window(async |attempt| {
            let subject = format!("client-{attempt}");
            let decision = consume(
                quota,
                &command(PROJECT, &subject, operation, "r"),
                config.limits(operation),
            )
            .await;
            OneWindow::default().check(&decision)?;
            let QuotaDecision::Admitted {
                reset_at_ms,
                observed_at_ms,
                ..
            } = decision
            else {
                panic!("{operation}: expected Admitted, got {decision:?}");
            };
            assert_eq!(
                reset_at_ms % window_ms,
                0,
                "{operation}: reset {reset_at_ms}"
            );
            assert!(reset_at_ms - window_ms <= observed_at_ms && observed_at_ms < reset_at_ms);
            let stored = harness.stored(PROJECT, &subject, operation).await.unwrap();
            assert_eq!(stored.window_started_at_ms, reset_at_ms - window_ms);
            Ok(())
        })
        .await;
    }
}

/// A full bucket whose window ended starts over: count 1 with only the new receipt, and
/// receipts of the old window are charged again.
pub async fn window_expiry_resets_count_and_receipts<F: QuotaFactory>(factory: &F) {
    let limits = limits(2);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let decide = async |receipt: &str| {
            consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, receipt),
                limits,
            )
            .await
        };
        let mut before = OneWindow::default();
        for receipt in ["old-1", "old-2"] {
            let decision = decide(receipt).await;
            before.check(&decision)?;
            remaining(&decision);
        }
        let full = decide("new-1").await;
        before.check(&full)?;
        retry_after(&full);

        harness.expire_windows().await;

        let mut after = OneWindow::default();
        let reset = decide("new-1").await;
        after.check(&reset)?;
        assert_eq!(remaining(&reset), 1, "the count starts over");
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.consumed_count, 1);
        assert_eq!(stored.receipt_ids, ["new-1"]);
        let reset_at_ms = reset.reset_at_ms().unwrap();
        assert_eq!(stored.window_started_at_ms, reset_at_ms - WINDOW_MS);
        let old = decide("old-1").await;
        after.check(&old)?;
        assert_eq!(
            remaining(&old),
            0,
            "a receipt of the old window is charged again"
        );
        let over = decide("old-2").await;
        after.check(&over)?;
        retry_after(&over);
        Ok(())
    })
    .await;
}
