//! Input rules: invalid commands are input errors that write nothing; the longest valid
//! values are stored intact; a bucket holds the largest allowed receipt set.

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::{CommandField, Operation, QuotaCommand, QuotaDecision};

fn invalid_commands() -> Vec<(QuotaCommand, CommandField)> {
    let ok = |project: &str, subject: &str, receipt: &str| {
        command(project, subject, Operation::Extract, receipt)
    };
    vec![
        (ok("", "s", "r"), CommandField::Project),
        (ok("-proj", "s", "r"), CommandField::Project),
        (ok("proj a", "s", "r"), CommandField::Project),
        (ok("proj/a", "s", "r"), CommandField::Project),
        (ok(&"p".repeat(129), "s", "r"), CommandField::Project),
        (ok("proj\n", "s", "r"), CommandField::Project),
        (ok("proj", "", "r"), CommandField::Subject),
        (ok("proj", &"s".repeat(256), "r"), CommandField::Subject),
        (ok("proj", "a\0b", "r"), CommandField::Subject),
        (ok("proj", "line\nbreak", "r"), CommandField::Subject),
        (ok("proj", "del\u{7f}", "r"), CommandField::Subject),
        (ok("proj", "s", ""), CommandField::ReceiptId),
        (ok("proj", "s", "/leading"), CommandField::ReceiptId),
        (ok("proj", "s", "with space"), CommandField::ReceiptId),
        (ok("proj", "s", "quote\"d"), CommandField::ReceiptId),
        (ok("proj", "s", "json\\escape"), CommandField::ReceiptId),
        (ok("proj", "s", &"r".repeat(265)), CommandField::ReceiptId),
        (ok("proj", "s", "r\u{e9}"), CommandField::ReceiptId),
    ]
}

/// Each invalid field is reported as an input error naming that field, and the store
/// stays empty; a valid command afterwards is stored (so the count can see a write).
pub async fn invalid_input_is_rejected_and_writes_nothing<F: QuotaFactory>(factory: &F) {
    let limits = limits(5);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    for (command, field) in invalid_commands() {
        match quota.consume(&command, limits).await {
            Err(error) => assert_eq!(error.field, field, "{command:?}"),
            Ok(decision) => panic!("{command:?} must be rejected, got {decision:?}"),
        }
    }
    assert_eq!(
        "Extract".parse::<Operation>().unwrap_err().field,
        CommandField::Operation
    );
    assert_eq!(
        harness.bucket_count().await,
        0,
        "invalid input wrote a bucket"
    );
    let valid = consume(
        quota,
        &command("proj", "s", Operation::Extract, "r"),
        limits,
    )
    .await;
    assert!(valid.is_admitted(), "{valid:?}");
    assert_eq!(harness.bucket_count().await, 1);
}

/// The longest valid project (128), subject (255 non-ASCII characters) and receipt (264,
/// every allowed punctuation) are admitted, stored byte for byte, and replay.
pub async fn longest_valid_inputs_are_stored_intact<F: QuotaFactory>(factory: &F) {
    let limits = limits(5);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    let project = format!("P{}", "a._:-9".repeat(22))
        .chars()
        .take(128)
        .collect::<String>();
    let receipt = format!("R{}", "z._:/-0".repeat(38))
        .chars()
        .take(264)
        .collect::<String>();
    assert_eq!((project.len(), receipt.len()), (128, 264));
    in_one_window(async |attempt| {
        let subject: String = format!("{attempt}{}", "ü 客/\"'\\;".repeat(40))
            .chars()
            .take(255)
            .collect();
        let command = command(&project, &subject, Operation::Inspect, &receipt);
        let mut window = OneWindow::default();
        let first = consume(quota, &command, limits).await;
        window.check(&first)?;
        assert_eq!(remaining(&first), 4);
        let replay = consume(quota, &command, limits).await;
        window.check(&replay)?;
        assert_eq!(remaining(&replay), 4);
        let stored = harness
            .stored(&project, &subject, Operation::Inspect)
            .await
            .expect("stored under the exact key");
        assert_eq!(stored.receipt_ids, std::slice::from_ref(&receipt));
        Ok(())
    })
    .await;
}

/// Limit 1000 with 264-byte receipts: all 1000 are admitted (the bucket reaches its largest
/// size, under the 320 KiB bound), the 1001st is exceeded, and any of them replays.
pub async fn full_bucket_holds_a_thousand_longest_receipts<F: QuotaFactory>(factory: &F) {
    let limits = limits(1000);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    let receipt = |index: usize| format!("{index:04}{}", "x".repeat(260));
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        for index in 0..1000 {
            let decision = consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, &receipt(index)),
                limits,
            )
            .await;
            window.check(&decision)?;
            assert_eq!(remaining(&decision), 999 - index as u32);
        }
        let over = consume(
            quota,
            &command(PROJECT, &subject, Operation::Extract, &receipt(1000)),
            limits,
        )
        .await;
        window.check(&over)?;
        assert!(matches!(over, QuotaDecision::Exceeded { .. }), "{over:?}");
        let replay = consume(
            quota,
            &command(PROJECT, &subject, Operation::Extract, &receipt(500)),
            limits,
        )
        .await;
        window.check(&replay)?;
        assert_eq!(remaining(&replay), 0);
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.consumed_count, 1000);
        assert_eq!(stored.receipt_ids.len(), 1000);
        assert_eq!(stored.receipt_ids[999], receipt(999));
        Ok(())
    })
    .await;
}
