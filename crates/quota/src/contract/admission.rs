//! Admission up to the limit, retry-after bounds, per-operation limits, concurrency.

use std::sync::Arc;

use tokio::sync::Barrier;

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::{Operation, QuotaConfig, QuotaDecision, QuotaPolicy};

/// Limit 3: three admissions counting down to 0, then every new receipt is exceeded with a
/// retry-after inside the window; the stored bucket holds exactly the admitted receipts.
pub async fn admits_up_to_the_limit_then_exceeds<F: QuotaFactory>(factory: &F) {
    let limits = limits(3);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        for (index, expected) in [2, 1, 0].into_iter().enumerate() {
            let receipt = format!("r{index}");
            let decision = consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, &receipt),
                limits,
            )
            .await;
            window.check(&decision)?;
            assert_eq!(remaining(&decision), expected, "admission {index}");
            let QuotaDecision::Admitted {
                reset_at_ms,
                observed_at_ms,
                policy,
                ..
            } = decision
            else {
                unreachable!("remaining() checked the variant");
            };
            assert!(observed_at_ms < reset_at_ms && reset_at_ms <= observed_at_ms + WINDOW_MS);
            assert_eq!(
                policy,
                QuotaPolicy {
                    operation: Operation::Extract,
                    limits
                }
            );
        }
        for index in 3..5 {
            let receipt = format!("r{index}");
            let decision = consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, &receipt),
                limits,
            )
            .await;
            window.check(&decision)?;
            let wait = retry_after(&decision);
            assert!((1..=WINDOW_MS).contains(&wait), "retry after {wait} ms");
        }
        let stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .expect("the bucket is stored");
        assert_eq!(stored.consumed_count, 3);
        assert_eq!(stored.receipt_ids, ["r0", "r1", "r2"]);
        Ok(())
    })
    .await;
}

/// For windows of 1 s, 7 s and 300 s: an admission's reset lies within one window of its
/// observation, and a denial's retry-after is between 1 ms and the window and points at the
/// same reset.
pub async fn retry_after_never_exceeds_the_window<F: QuotaFactory>(factory: &F) {
    let config = QuotaConfig::default()
        .with(Operation::Extract, limits_in(1, 1))
        .with(Operation::Inspect, limits_in(7, 1))
        .with(Operation::Admin, limits_in(300, 1));
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    for operation in Operation::ALL {
        let window_ms = config.limits(operation).window_ms();
        in_one_window(async |attempt| {
            let subject = format!("client-{attempt}");
            let mut window = OneWindow::default();
            let first = consume(
                quota,
                &command(PROJECT, &subject, operation, "first"),
                config.limits(operation),
            )
            .await;
            window.check(&first)?;
            let QuotaDecision::Admitted {
                reset_at_ms,
                observed_at_ms,
                ..
            } = first
            else {
                panic!("{operation}: expected Admitted, got {first:?}");
            };
            assert!(reset_at_ms > observed_at_ms && reset_at_ms - observed_at_ms <= window_ms);
            let second = consume(
                quota,
                &command(PROJECT, &subject, operation, "second"),
                config.limits(operation),
            )
            .await;
            window.check(&second)?;
            let wait = retry_after(&second);
            assert!(
                (1..=window_ms).contains(&wait),
                "{operation}: retry after {wait} ms"
            );
            assert!(
                wait <= reset_at_ms - observed_at_ms,
                "{operation}: time runs forward"
            );
            Ok(())
        })
        .await;
    }
}

/// Each operation has its own limit and its own bucket for the same subject.
pub async fn limits_are_per_operation<F: QuotaFactory>(factory: &F) {
    let config = QuotaConfig::default()
        .with(Operation::Extract, limits(2))
        .with(Operation::Inspect, limits(3))
        .with(Operation::Admin, limits(1));
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        for operation in Operation::ALL {
            let limit = config.limits(operation).limit();
            for index in 0..=limit {
                let receipt = format!("{operation}-{index}");
                let decision = consume(
                    quota,
                    &command(PROJECT, &subject, operation, &receipt),
                    config.limits(operation),
                )
                .await;
                window.check(&decision)?;
                if index < limit {
                    assert_eq!(
                        remaining(&decision),
                        limit - index - 1,
                        "{operation} #{index}"
                    );
                } else {
                    let QuotaDecision::Exceeded { policy, .. } = decision else {
                        panic!("{operation}: expected Exceeded, got {decision:?}");
                    };
                    assert_eq!(policy, config.policy(operation));
                }
            }
            let stored = harness.stored(PROJECT, &subject, operation).await.unwrap();
            assert_eq!(stored.consumed_count, limit, "{operation}");
        }
        Ok(())
    })
    .await;
}

/// 16 callers with distinct receipts race for one bucket of limit 8: exactly 8 are
/// admitted, 8 exceeded, and the bucket holds exactly the admitted receipts.
pub async fn concurrent_distinct_receipts_admit_exactly_the_limit<F: QuotaFactory>(factory: &F) {
    const CALLERS: usize = 16;
    const LIMIT: u32 = 8;
    let limits = limits(LIMIT);
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
                (command.receipt_id, decision)
            });
        }
        let mut window = OneWindow::default();
        let mut admitted = Vec::new();
        let mut exceeded = 0;
        while let Some(joined) = tasks.join_next().await {
            let (receipt, decision) = joined.expect("caller task");
            window.check(&decision)?;
            match decision {
                QuotaDecision::Admitted { .. } => admitted.push(receipt),
                QuotaDecision::Exceeded { .. } => exceeded += 1,
                QuotaDecision::Unavailable { .. } => unreachable!("OneWindow rejects it"),
            }
        }
        assert_eq!(
            (admitted.len(), exceeded),
            (LIMIT as usize, CALLERS - LIMIT as usize)
        );
        let mut stored = harness
            .stored(PROJECT, &subject, Operation::Extract)
            .await
            .expect("the bucket is stored");
        assert_eq!(stored.consumed_count, LIMIT);
        stored.receipt_ids.sort();
        admitted.sort();
        assert_eq!(stored.receipt_ids, admitted);
        Ok(())
    })
    .await;
}
