//! The SQL the PostgreSQL backend runs, in one place so it can be read (and quoted) whole.
//!
//! Parameters of both statements: `$1` project, `$2` subject, `$3` operation, `$4` receipt,
//! `$5` window length in ms, `$6` limit (the read uses `$1..$3` and `$4` = window).
//! Every number comes back as `bigint` so the row decodes the same way on any path.

/// The decision: one statement around one `INSERT … ON CONFLICT DO UPDATE … WHERE …
/// RETURNING`, an implicit transaction of its own.
///
/// The clock is `clock_timestamp()`, read once in a materialized CTE (volatile functions are
/// never inlined, so the window start, `updated_at_ms` and the reported time agree). The
/// proposed row (`excluded`) carries the current aligned window; against a stored bucket:
/// - stored window older than the current one: reset to count 1 and `[receipt]`;
/// - receipt already in the window: unchanged (admitted, not charged again);
/// - count under the limit: count + 1, receipt appended;
/// - otherwise the `WHERE` is false: the row is locked but not updated, and the upsert
///   returns nothing, which means "full".
///
/// The limit (`$6`) is the caller's and is not stored: a bucket charged under a higher
/// limit is full (`>=`) under a lower one, its receipts still replay, and a raised limit
/// charges on from the stored count. No CHECK ties the count to a limit, only to the hard
/// cap no limit exceeds.
///
/// Concurrent decisions on one bucket serialize on its row lock, and `ON CONFLICT DO
/// UPDATE` re-evaluates against the latest committed row, so replicas cannot over-admit.
///
/// Two additions keep a bucket under pressure cheap, both resting on one fact: *within a
/// window a full bucket stays full and its receipts stay as they are* (only a new window
/// changes them). So when the statement's snapshot already shows the bucket full in the
/// current window without this receipt, the answer is "exceeded" whatever happened since:
/// - the upsert is skipped (`WHERE NOT EXISTS` on its `SELECT`), so a denial takes no row
///   lock and writes nothing;
/// - the second branch returns that snapshot row (`admitted = 0`), so a denial is one round
///   trip, not a decision plus a separate read.
///
/// Output: one row `(admitted, count, receipts, reset_at_ms, observed_at_ms)`: the upsert's
/// `RETURNING` (`admitted = 1`), or the snapshot row (`admitted = 0`), or no row. The
/// snapshot may predate the version the upsert locked: a bucket inserted concurrently is
/// invisible (no row: the caller falls back to [`READ_BUCKET`]) and one changed
/// concurrently shows its older version, which can only look less full or older than the
/// truth; the caller's validation treats both as "changed" and decides again.
pub(crate) const DECIDE: &str = r#"
WITH clock AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
snapshot AS MATERIALIZED (
    SELECT stored.consumed_count, stored.receipt_ids, stored.window_started_at_ms
    FROM proxypool_quota.quota_buckets AS stored
    WHERE stored.project_id = $1 AND stored.subject_id = $2 AND stored.operation = $3
),
decided AS (
    INSERT INTO proxypool_quota.quota_buckets AS bucket
        (project_id, subject_id, operation,
         window_started_at_ms, consumed_count, receipt_ids, updated_at_ms)
    SELECT $1, $2, $3,
           clock.now_ms - clock.now_ms % $5::bigint, 1, jsonb_build_array($4::text),
           clock.now_ms
    FROM clock
    WHERE NOT EXISTS (
        SELECT 1 FROM snapshot
        WHERE snapshot.window_started_at_ms = clock.now_ms - clock.now_ms % $5::bigint
          AND snapshot.consumed_count >= $6::bigint
          AND NOT snapshot.receipt_ids ? $4::text)
    ON CONFLICT (project_id, subject_id, operation) DO UPDATE SET
        window_started_at_ms = CASE
            WHEN bucket.window_started_at_ms < excluded.window_started_at_ms
                THEN excluded.window_started_at_ms
            ELSE bucket.window_started_at_ms END,
        consumed_count = CASE
            WHEN bucket.window_started_at_ms < excluded.window_started_at_ms THEN 1
            WHEN bucket.receipt_ids ? $4::text THEN bucket.consumed_count
            ELSE bucket.consumed_count + 1 END,
        receipt_ids = CASE
            WHEN bucket.window_started_at_ms < excluded.window_started_at_ms
                THEN excluded.receipt_ids
            WHEN bucket.receipt_ids ? $4::text THEN bucket.receipt_ids
            ELSE bucket.receipt_ids || excluded.receipt_ids END,
        updated_at_ms = GREATEST(bucket.updated_at_ms, excluded.updated_at_ms)
    WHERE bucket.window_started_at_ms < excluded.window_started_at_ms
       OR bucket.receipt_ids ? $4::text
       OR bucket.consumed_count < $6::bigint
    RETURNING bucket.consumed_count,
              jsonb_array_length(bucket.receipt_ids) AS receipt_count,
              bucket.window_started_at_ms
)
SELECT 1::bigint,
       decided.consumed_count::bigint,
       decided.receipt_count::bigint,
       (decided.window_started_at_ms + $5::bigint)::bigint,
       clock.now_ms
FROM decided, clock
UNION ALL
SELECT 0::bigint,
       snapshot.consumed_count::bigint,
       jsonb_array_length(snapshot.receipt_ids)::bigint,
       (snapshot.window_started_at_ms + $5::bigint)::bigint,
       clock.now_ms
FROM snapshot, clock
WHERE NOT EXISTS (SELECT 1 FROM decided)
"#;

/// The follow-up read when [`DECIDE`] returned no row (the bucket was inserted concurrently,
/// after the statement's snapshot, and was already full): the bucket as it is now and the
/// database clock now, from which `retry_after = reset − now`. A new statement, so a new
/// snapshot that sees the row.
pub(crate) const READ_BUCKET: &str = r#"
SELECT consumed_count::bigint,
       jsonb_array_length(receipt_ids)::bigint,
       (window_started_at_ms + $4::bigint)::bigint,
       floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM proxypool_quota.quota_buckets
WHERE project_id = $1 AND subject_id = $2 AND operation = $3
"#;
