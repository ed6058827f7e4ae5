//! Settling charges: decisions say whether they charged, a refund undoes exactly one charge,
//! a spend keeps the charge and frees the receipt, and nothing settles outside the charge's
//! window or from bad input.

use std::sync::Arc;

use tokio::sync::Barrier;

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::{
    Charge, CommandField, InputProblem, Operation, QuotaCommand, QuotaDecision, SettleOutcome,
    Settlement,
};

fn charged(decision: &QuotaDecision) -> bool {
    match decision {
        QuotaDecision::Admitted { charged, .. } => *charged,
        other => panic!("expected Admitted, got {other:?}"),
    }
}

fn charge_of(decision: &QuotaDecision, command: &QuotaCommand) -> Charge {
    decision
        .charge(command)
        .unwrap_or_else(|| panic!("{decision:?} made no charge"))
}

async fn settle<Q: QuotaPort + ?Sized>(
    quota: &Q,
    charge: &Charge,
    settlement: Settlement,
) -> SettleOutcome {
    quota
        .settle(charge, &settlement)
        .await
        .unwrap_or_else(|error| panic!("valid settlement of {charge:?} rejected: {error}"))
}

fn spend(as_receipt: &str) -> Settlement {
    Settlement::Spend {
        spent_as: as_receipt.to_owned(),
    }
}

/// A new receipt is charged, its replay is not (and carries no charge to settle), a new
/// window charges it again.
pub async fn decisions_say_whether_they_charged<F: QuotaFactory>(factory: &F) {
    let limits = limits(5);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let first_command = command(PROJECT, &subject, Operation::Extract, "key:a");
        let first = consume(quota, &first_command, limits).await;
        window.check(&first)?;
        assert!(charged(&first), "{first:?}");
        let replay = consume(quota, &first_command, limits).await;
        window.check(&replay)?;
        assert!(!charged(&replay), "{replay:?}");
        assert_eq!(replay.charge(&first_command), None);
        let other = consume(
            quota,
            &command(PROJECT, &subject, Operation::Extract, "key:b"),
            limits,
        )
        .await;
        window.check(&other)?;
        assert!(charged(&other));
        Ok(())
    })
    .await;
    let subject = "client-next-window";
    let key = command(PROJECT, subject, Operation::Extract, "key:a");
    assert!(charged(&consume(quota, &key, limits).await));
    harness.expire_windows().await;
    let again = consume(quota, &key, limits).await;
    assert!(charged(&again), "a new window charges the receipt again");
    assert_eq!(remaining(&again), 4);
}

/// A refund removes the receipt and the charge: the count drops, the receipt charges anew,
/// and a second refund of the same charge finds nothing.
pub async fn refund_undoes_exactly_one_charge<F: QuotaFactory>(factory: &F) {
    let limits = limits(3);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let a = command(PROJECT, &subject, Operation::Extract, "key:a");
        let b = command(PROJECT, &subject, Operation::Extract, "req:b");
        window.check(&consume(quota, &a, limits).await)?;
        let decided_b = consume(quota, &b, limits).await;
        window.check(&decided_b)?;
        assert_eq!(remaining(&decided_b), 1);
        let charge = charge_of(&decided_b, &b);
        assert_eq!(
            settle(quota, &charge, Settlement::Refund).await,
            SettleOutcome::Settled
        );
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(
            (stored.consumed_count, stored.receipt_ids),
            (1, vec![a.receipt_id.clone()])
        );
        assert_eq!(
            settle(quota, &charge, Settlement::Refund).await,
            SettleOutcome::NotFound,
            "a charge is refunded once"
        );
        let again = consume(quota, &b, limits).await;
        window.check(&again)?;
        assert!(charged(&again), "a refunded receipt is charged afresh");
        assert_eq!(remaining(&again), 1);
        Ok(())
    })
    .await;
}

/// A refund in a full bucket makes room for a new receipt; refunding the only charge
/// leaves an empty bucket that still decides.
pub async fn refund_makes_room_and_can_empty_a_bucket<F: QuotaFactory>(factory: &F) {
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let limits = limits(2);
        let subject = format!("full-{attempt}");
        let mut window = OneWindow::default();
        let a = command(PROJECT, &subject, Operation::Extract, "a");
        let decided_a = consume(quota, &a, limits).await;
        window.check(&decided_a)?;
        window.check(
            &consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, "b"),
                limits,
            )
            .await,
        )?;
        let c = command(PROJECT, &subject, Operation::Extract, "c");
        let over = consume(quota, &c, limits).await;
        window.check(&over)?;
        assert!(matches!(over, QuotaDecision::Exceeded { .. }), "{over:?}");
        assert_eq!(over.charge(&c), None, "a denial charges nothing");
        assert_eq!(
            settle(quota, &charge_of(&decided_a, &a), Settlement::Refund).await,
            SettleOutcome::Settled
        );
        let admitted = consume(quota, &c, limits).await;
        window.check(&admitted)?;
        assert_eq!(remaining(&admitted), 0);

        let limits = super::fixtures::limits(1);
        let subject = format!("single-{attempt}");
        let only = command(PROJECT, &subject, Operation::Inspect, "only");
        let decided = consume(quota, &only, limits).await;
        window.check(&decided)?;
        assert_eq!(
            settle(quota, &charge_of(&decided, &only), Settlement::Refund).await,
            SettleOutcome::Settled
        );
        let stored = harness
            .stored(PROJECT, &subject, Operation::Inspect)
            .await
            .expect("an emptied bucket stays stored");
        assert_eq!(stored.consumed_count, 0);
        assert!(stored.receipt_ids.is_empty());
        let next = consume(
            quota,
            &command(PROJECT, &subject, Operation::Inspect, "next"),
            limits,
        )
        .await;
        window.check(&next)?;
        assert!(charged(&next));
        assert_eq!(remaining(&next), 0);
        Ok(())
    })
    .await;
}

/// A spend keeps the count, renames the charge, and frees the receipt: the next request
/// with it is charged again. A spend onto a receipt already charged changes nothing.
pub async fn spend_keeps_the_charge_and_frees_the_receipt<F: QuotaFactory>(factory: &F) {
    let limits = limits(3);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let key = command(PROJECT, &subject, Operation::Extract, "key:k");
        let first = consume(quota, &key, limits).await;
        window.check(&first)?;
        assert_eq!(remaining(&first), 2);
        assert_eq!(
            settle(quota, &charge_of(&first, &key), spend("spent:r1")).await,
            SettleOutcome::Settled
        );
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(
            (stored.consumed_count, stored.receipt_ids),
            (1, vec!["spent:r1".to_owned()])
        );
        let second = consume(quota, &key, limits).await;
        window.check(&second)?;
        assert!(charged(&second), "a spent receipt is charged again");
        assert_eq!(remaining(&second), 1);
        let charge = charge_of(&second, &key);
        assert_eq!(
            settle(quota, &charge, spend("spent:r1")).await,
            SettleOutcome::NotFound,
            "spent_as already charged"
        );
        assert_eq!(
            settle(quota, &charge, spend("spent:r2")).await,
            SettleOutcome::Settled
        );
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.consumed_count, 2);
        assert_eq!(stored.receipt_ids, ["spent:r1", "spent:r2"]);
        Ok(())
    })
    .await;
}

/// Once the charge's window is over, a settlement finds nothing and changes nothing.
pub async fn settling_after_the_window_ended_changes_nothing<F: QuotaFactory>(factory: &F) {
    let limits = limits(5);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    let subject = "client-late";
    let a = command(PROJECT, subject, Operation::Extract, "key:a");
    let decided = consume(quota, &a, limits).await;
    let charge = charge_of(&decided, &a);
    let before = harness
        .stored(PROJECT, subject, Operation::Extract)
        .await
        .unwrap();
    harness.expire_windows().await;
    let moved = harness
        .stored(PROJECT, subject, Operation::Extract)
        .await
        .unwrap();
    for settlement in [Settlement::Refund, spend("spent:x")] {
        assert_eq!(
            settle(quota, &charge, settlement).await,
            SettleOutcome::NotFound
        );
    }
    let after = harness
        .stored(PROJECT, subject, Operation::Extract)
        .await
        .unwrap();
    assert_eq!(after, moved);
    assert_eq!(after.receipt_ids, before.receipt_ids);
}

/// Bad input is an error naming the field, and the bucket is untouched.
pub async fn invalid_settlements_are_rejected_and_write_nothing<F: QuotaFactory>(factory: &F) {
    let limits = limits(5);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    let subject = "client-invalid";
    let a = command(PROJECT, subject, Operation::Extract, "key:a");
    let decided = consume(quota, &a, limits).await;
    let charge = charge_of(&decided, &a);
    let before = harness.stored(PROJECT, subject, Operation::Extract).await;
    let bad_command = Charge {
        command: command(PROJECT, subject, Operation::Extract, "/bad"),
        ..charge.clone()
    };
    let cases = [
        (
            &charge,
            spend(""),
            CommandField::SpentAs,
            InputProblem::Empty,
        ),
        (
            &charge,
            spend("with space"),
            CommandField::SpentAs,
            InputProblem::ForbiddenCharacter,
        ),
        (
            &charge,
            spend("key:a"),
            CommandField::SpentAs,
            InputProblem::SameAsReceipt,
        ),
        (
            &bad_command,
            Settlement::Refund,
            CommandField::ReceiptId,
            InputProblem::BadFirstCharacter,
        ),
    ];
    for (charge, settlement, field, problem) in cases {
        let error = quota
            .settle(charge, &settlement)
            .await
            .expect_err("invalid settlement");
        assert_eq!(
            (error.field, error.problem),
            (field, problem),
            "{settlement:?}"
        );
    }
    assert_eq!(
        harness.stored(PROJECT, subject, Operation::Extract).await,
        before
    );
}

/// 24 callers with distinct receipts race for a bucket of limit 8 while every second
/// admitted caller refunds its charge at once: the bucket ends holding exactly the charges
/// that were not refunded, and never more than the limit.
pub async fn concurrent_charges_and_refunds_stay_exact<F: QuotaFactory>(factory: &F) {
    const CALLERS: usize = 24;
    let limits = limits(8);
    let harness = crate::fresh_quota!(factory);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let barrier = Arc::new(Barrier::new(CALLERS));
        let mut tasks = tokio::task::JoinSet::new();
        for caller in 0..CALLERS {
            let quota = harness.quota().clone();
            let barrier = barrier.clone();
            let command = command(
                PROJECT,
                &subject,
                Operation::Extract,
                &format!("c{caller:02}"),
            );
            tasks.spawn(async move {
                barrier.wait().await;
                let decision = consume(&quota, &command, limits).await;
                let refunded = match decision.charge(&command) {
                    Some(charge) if caller % 2 == 0 => {
                        let outcome = settle(&quota, &charge, Settlement::Refund).await;
                        assert_eq!(outcome, SettleOutcome::Settled, "{command:?}");
                        true
                    }
                    _ => false,
                };
                (command.receipt_id, decision, refunded)
            });
        }
        let mut window = OneWindow::default();
        let mut kept = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (receipt, decision, refunded) = joined.expect("caller task");
            window.check(&decision)?;
            if decision.is_admitted() && !refunded {
                kept.push(receipt);
            }
        }
        let mut stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .expect("the bucket is stored");
        assert!(stored.consumed_count <= 8);
        assert_eq!(stored.consumed_count as usize, kept.len());
        stored.receipt_ids.sort();
        kept.sort();
        assert_eq!(stored.receipt_ids, kept);
        Ok(())
    })
    .await;
}

/// 16 callers race with the same receipt on a fresh bucket: exactly one is charged, the
/// others replay it, and the bucket holds it once.
pub async fn concurrent_same_receipt_is_charged_once<F: QuotaFactory>(factory: &F) {
    const CALLERS: usize = 16;
    let limits = limits(8);
    let harness = crate::fresh_quota!(factory);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let barrier = Arc::new(Barrier::new(CALLERS));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..CALLERS {
            let quota = harness.quota().clone();
            let barrier = barrier.clone();
            let command = command(PROJECT, &subject, Operation::Extract, "key:same");
            tasks.spawn(async move {
                barrier.wait().await;
                consume(&quota, &command, limits).await
            });
        }
        let mut window = OneWindow::default();
        let mut charges = 0;
        while let Some(joined) = tasks.join_next().await {
            let decision = joined.expect("caller task");
            window.check(&decision)?;
            if charged(&decision) {
                charges += 1;
            }
            assert_eq!(remaining(&decision), 7);
        }
        assert_eq!(charges, 1, "one caller charged, the rest replayed");
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(stored.receipt_ids, ["key:same"]);
        Ok(())
    })
    .await;
}
