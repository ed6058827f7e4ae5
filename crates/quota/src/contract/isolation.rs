//! Buckets are keyed by (project, subject, operation) and nothing else.

use super::fixtures::*;
use super::harness::{QuotaFactory, QuotaHarness};
use crate::Operation;

/// Limit 1: filling one bucket leaves every neighbour (another project, another subject,
/// another operation, a project differing only in case) untouched, and the same receipt
/// is charged separately in each bucket.
pub async fn buckets_are_separate_per_project_subject_and_operation<F: QuotaFactory>(factory: &F) {
    let limits = limits(1);
    let harness = crate::fresh_quota!(factory);
    let quota = harness.quota();
    let subject = "client-1";
    in_one_window(async |attempt| {
        let project = format!("proj-{attempt}");
        let upper = format!("PROJ-{attempt}");
        let other_project = format!("other-{attempt}");
        let mut window = OneWindow::default();
        let home = command(&project, subject, Operation::Extract, "same");
        let first = consume(quota, &home, limits).await;
        window.check(&first)?;
        assert_eq!(remaining(&first), 0);
        let full = consume(
            quota,
            &command(&project, subject, Operation::Extract, "other"),
            limits,
        )
        .await;
        window.check(&full)?;
        retry_after(&full);
        let neighbours = [
            command(&other_project, subject, Operation::Extract, "same"),
            command(&upper, subject, Operation::Extract, "same"),
            command(&project, "client-2", Operation::Extract, "same"),
            command(&project, subject, Operation::Inspect, "same"),
            command(&project, subject, Operation::Admin, "same"),
        ];
        for neighbour in &neighbours {
            let decision = consume(quota, neighbour, limits).await;
            window.check(&decision)?;
            assert_eq!(
                remaining(&decision),
                0,
                "{neighbour:?} has a bucket of its own"
            );
        }
        for bucket in std::iter::once(&home).chain(&neighbours) {
            let stored = harness
                .stored(&bucket.project, &bucket.subject, bucket.operation)
                .await
                .unwrap_or_else(|| panic!("{bucket:?} is stored"));
            assert_eq!(
                (stored.consumed_count, stored.receipt_ids),
                (1, vec!["same".to_owned()])
            );
        }
        Ok(())
    })
    .await;
    let buckets = harness.bucket_count().await;
    assert!(
        (6..=18).contains(&buckets),
        "six buckets per run, got {buckets}"
    );
}
