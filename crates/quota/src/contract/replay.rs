//! Receipts: the same receipt inside one window is charged once.

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::{Operation, QuotaDecision};

/// A replayed receipt is admitted with the same `remaining` and reset, and the bucket
/// keeps one copy of it.
pub async fn replayed_receipt_is_admitted_without_charge<F: QuotaFactory>(factory: &F) {
    let limits = limits(5);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let consume_receipt = async |receipt: &str| {
            consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, receipt),
                limits,
            )
            .await
        };
        let first = consume_receipt("idem-1").await;
        window.check(&first)?;
        assert_eq!(remaining(&first), 4);
        let replay = consume_receipt("idem-1").await;
        window.check(&replay)?;
        assert_eq!(remaining(&replay), 4, "a replay is not charged");
        assert_eq!(replay.reset_at_ms(), first.reset_at_ms());
        let second = consume_receipt("idem-2").await;
        window.check(&second)?;
        assert_eq!(remaining(&second), 3);
        let replay = consume_receipt("idem-1").await;
        window.check(&replay)?;
        assert_eq!(
            remaining(&replay),
            3,
            "an older receipt replays at the current count"
        );
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.consumed_count, 2);
        assert_eq!(stored.receipt_ids, ["idem-1", "idem-2"]);
        Ok(())
    })
    .await;
}

/// Limit 2, full: the admitted receipts still replay as admitted (remaining 0), a new
/// receipt stays exceeded, and nothing is charged.
pub async fn replay_is_admitted_after_the_window_filled_up<F: QuotaFactory>(factory: &F) {
    let limits = limits(2);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let mut decide = async |receipt: &str| -> Result<QuotaDecision, Crossed> {
            let decision = consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, receipt),
                limits,
            )
            .await;
            window.check(&decision)?;
            Ok(decision)
        };
        assert_eq!(remaining(&decide("a").await?), 1);
        assert_eq!(remaining(&decide("b").await?), 0);
        retry_after(&decide("c").await?);
        assert_eq!(
            remaining(&decide("a").await?),
            0,
            "replay of a in a full window"
        );
        assert_eq!(
            remaining(&decide("b").await?),
            0,
            "replay of b in a full window"
        );
        retry_after(&decide("c").await?);
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.consumed_count, 2);
        assert_eq!(stored.receipt_ids, ["a", "b"]);
        Ok(())
    })
    .await;
}
