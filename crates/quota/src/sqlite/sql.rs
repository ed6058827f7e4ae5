//! The SQL the SQLite backend runs: the PostgreSQL statements translated to SQLite.
//!
//! Parameters: `?1` project, `?2` subject, `?3` operation, `?4` receipt, `?5` window length
//! in ms, `?6` limit (the read uses `?1..?3` and `?4` = window).
//!
//! The clock is SQLite's: `unixepoch('subsec')` has millisecond resolution and, like every
//! `'now'`, is the same for the whole statement. Rounding (not truncating) turns the
//! float back into the exact millisecond.

/// The decision: one `INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING`, an implicit
/// transaction that takes SQLite's write lock before it reads, so concurrent connections
/// serialize on it. Same cases as PostgreSQL's (`crate::postgres::PostgresQuota::DECISION_SQL`):
/// expired window resets, a present receipt is admitted unchanged, under the limit appends,
/// otherwise no row comes back (full). `WHERE true` is SQLite's required disambiguation
/// between an `INSERT … SELECT` and its `ON CONFLICT`.
pub(crate) const DECIDE: &str = r#"
WITH clock(now_ms) AS MATERIALIZED (
    SELECT CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
)
INSERT INTO quota_buckets AS bucket
    (project_id, subject_id, operation,
     window_started_at_ms, consumed_count, receipt_ids, updated_at_ms)
SELECT ?1, ?2, ?3, now_ms - now_ms % ?5, 1, json_array(?4), now_ms
FROM clock WHERE true
ON CONFLICT (project_id, subject_id, operation) DO UPDATE SET
    window_started_at_ms = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms
            THEN excluded.window_started_at_ms
        ELSE bucket.window_started_at_ms END,
    consumed_count = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms THEN 1
        WHEN EXISTS (SELECT 1 FROM json_each(bucket.receipt_ids) WHERE value = ?4)
            THEN bucket.consumed_count
        ELSE bucket.consumed_count + 1 END,
    receipt_ids = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms
            THEN excluded.receipt_ids
        WHEN EXISTS (SELECT 1 FROM json_each(bucket.receipt_ids) WHERE value = ?4)
            THEN bucket.receipt_ids
        ELSE json_insert(bucket.receipt_ids, '$[#]', ?4) END,
    updated_at_ms = max(bucket.updated_at_ms, excluded.updated_at_ms)
WHERE bucket.window_started_at_ms < excluded.window_started_at_ms
   OR EXISTS (SELECT 1 FROM json_each(bucket.receipt_ids) WHERE value = ?4)
   OR bucket.consumed_count < ?6
RETURNING consumed_count,
          json_array_length(receipt_ids),
          window_started_at_ms + ?5,
          (SELECT now_ms FROM clock)
"#;

/// The follow-up read when [`DECIDE`] returned no row.
pub(crate) const READ_BUCKET: &str = r#"
SELECT consumed_count,
       json_array_length(receipt_ids),
       window_started_at_ms + ?4,
       CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
FROM quota_buckets
WHERE project_id = ?1 AND subject_id = ?2 AND operation = ?3
"#;
