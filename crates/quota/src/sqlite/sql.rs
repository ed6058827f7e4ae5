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
/// otherwise no row comes back (full) and the caller runs [`READ_BUCKET`]. (SQLite has no
/// data-modifying CTEs, so the read cannot ride along as it does on PostgreSQL.) The first
/// column, `admitted = 1`, keeps the row shape of PostgreSQL's statement.
///
/// The limit (`?6`) is the caller's and is not stored, as on PostgreSQL: a bucket charged
/// under a higher limit is full under a lower one and its receipts still replay.
///
/// Differences, all SQLite's: receipts are JSONB (`jsonb_array`, `jsonb_insert`); whether
/// the receipt is already stored in the current window is computed once, in the `seen`
/// CTE, rather than in each `CASE` (the statement holds the write lock from its start, so
/// that read cannot go stale), which is also what tells a replay from a new charge: the
/// upsert records it in `last_decision_charged` and `RETURNING` reads it back (a subquery
/// in `RETURNING` would already see the row this statement wrote);
/// and `WHERE true` is SQLite's required disambiguation between `INSERT … SELECT` and its
/// `ON CONFLICT`.
pub(crate) const DECIDE: &str = r#"
WITH clock(now_ms) AS MATERIALIZED (
    SELECT CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
),
seen(present) AS MATERIALIZED (
    SELECT EXISTS (
        SELECT 1 FROM quota_buckets AS stored, json_each(stored.receipt_ids) AS receipt, clock
        WHERE stored.project_id = ?1 AND stored.subject_id = ?2 AND stored.operation = ?3
          AND stored.window_started_at_ms = clock.now_ms - clock.now_ms % ?5
          AND receipt.value = ?4)
)
INSERT INTO quota_buckets AS bucket
    (project_id, subject_id, operation,
     window_started_at_ms, consumed_count, receipt_ids, updated_at_ms, last_decision_charged)
SELECT ?1, ?2, ?3, now_ms - now_ms % ?5, 1, jsonb_array(?4), now_ms, 1
FROM clock WHERE true
ON CONFLICT (project_id, subject_id, operation) DO UPDATE SET
    window_started_at_ms = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms
            THEN excluded.window_started_at_ms
        ELSE bucket.window_started_at_ms END,
    consumed_count = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms THEN 1
        WHEN (SELECT present FROM seen) THEN bucket.consumed_count
        ELSE bucket.consumed_count + 1 END,
    receipt_ids = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms
            THEN excluded.receipt_ids
        WHEN (SELECT present FROM seen) THEN bucket.receipt_ids
        ELSE jsonb_insert(bucket.receipt_ids, '$[#]', ?4) END,
    updated_at_ms = max(bucket.updated_at_ms, excluded.updated_at_ms),
    last_decision_charged = CASE
        WHEN bucket.window_started_at_ms < excluded.window_started_at_ms THEN 1
        WHEN (SELECT present FROM seen) THEN 0
        ELSE 1 END
WHERE bucket.window_started_at_ms < excluded.window_started_at_ms
   OR bucket.consumed_count < ?6
   OR (SELECT present FROM seen)
RETURNING 1,
          last_decision_charged,
          consumed_count,
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

/// Refunds a charge (see `crate::postgres` for the rules): the receipt is removed, keeping
/// the others in order, and the count drops by one. (`jsonb_group_array` over no rows
/// gives the text `[]`, which the STRICT BLOB column refuses: hence the `jsonb()`.) Parameters: `?1..?3` the bucket, `?4`
/// receipt, `?5` the charge's window start, `?6` window length in ms. One row when it
/// applied, none otherwise.
pub(crate) const REFUND: &str = r#"
UPDATE quota_buckets SET
    consumed_count = consumed_count - 1,
    receipt_ids = jsonb((
        SELECT jsonb_group_array(receipt.value ORDER BY receipt.key)
        FROM json_each(quota_buckets.receipt_ids) AS receipt
        WHERE receipt.value <> ?4)),
    updated_at_ms = max(updated_at_ms, CAST(round(unixepoch('subsec') * 1000) AS INTEGER))
WHERE project_id = ?1 AND subject_id = ?2 AND operation = ?3
  AND window_started_at_ms = ?5
  AND CAST(round(unixepoch('subsec') * 1000) AS INTEGER) % ?6
      = CAST(round(unixepoch('subsec') * 1000) AS INTEGER) - ?5
  AND EXISTS (SELECT 1 FROM json_each(quota_buckets.receipt_ids) WHERE value = ?4)
RETURNING 1
"#;

/// Spends a charge: the receipt is replaced by `?7`, appended last; the count stays. Same
/// conditions as [`REFUND`], and `?7` must not be charged already.
pub(crate) const SPEND: &str = r#"
UPDATE quota_buckets SET
    receipt_ids = jsonb_insert(
        (SELECT jsonb_group_array(receipt.value ORDER BY receipt.key)
         FROM json_each(quota_buckets.receipt_ids) AS receipt
         WHERE receipt.value <> ?4),
        '$[#]', ?7),
    updated_at_ms = max(updated_at_ms, CAST(round(unixepoch('subsec') * 1000) AS INTEGER))
WHERE project_id = ?1 AND subject_id = ?2 AND operation = ?3
  AND window_started_at_ms = ?5
  AND CAST(round(unixepoch('subsec') * 1000) AS INTEGER) % ?6
      = CAST(round(unixepoch('subsec') * 1000) AS INTEGER) - ?5
  AND EXISTS (SELECT 1 FROM json_each(quota_buckets.receipt_ids) WHERE value = ?4)
  AND NOT EXISTS (SELECT 1 FROM json_each(quota_buckets.receipt_ids) WHERE value = ?7)
RETURNING 1
"#;

/// The store ledger's entry of a pool (`?1`): identity, generation, lost_at_ms, hold_ms,
/// loss, installed; no row when the pool has none. The PostgreSQL statements translated;
/// `crate::sql_ledger` says what each one means.
pub(crate) const LEDGER_LOAD: &str = r#"
SELECT identity, generation, lost_at_ms, hold_ms, loss, installed
FROM store_ledger
WHERE pool = ?1
"#;

/// The first entry of a pool: `?1` pool, `?2..?7` the entry's columns. A row back when it
/// inserted; none when the pool already had an entry (unchanged).
pub(crate) const LEDGER_INSERT: &str = r#"
INSERT INTO store_ledger
    (pool, identity, generation, lost_at_ms, hold_ms, loss, installed, updated_at_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, CAST(round(unixepoch('subsec') * 1000) AS INTEGER))
ON CONFLICT (pool) DO NOTHING
RETURNING 1
"#;

/// The compare-and-set of an entry: `?1` pool, `?2` the identity the caller expects it to
/// name, `?3..?8` the new entry's columns. A row back when it wrote. SQLite runs one
/// writer at a time, so the `WHERE` sees the last committed entry.
pub(crate) const LEDGER_UPDATE: &str = r#"
UPDATE store_ledger SET
    identity = ?3,
    generation = ?4,
    lost_at_ms = ?5,
    hold_ms = ?6,
    loss = ?7,
    installed = ?8,
    updated_at_ms = CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
WHERE pool = ?1 AND identity = ?2
RETURNING 1
"#;

/// Raises the generation of the entry of pool `?1` to `?3` if it names identity `?2`; never
/// lowers it (SQLite's two-argument `max` is its `GREATEST`).
pub(crate) const LEDGER_RAISE: &str = r#"
UPDATE store_ledger SET
    generation = max(generation, ?3),
    updated_at_ms = CAST(round(unixepoch('subsec') * 1000) AS INTEGER)
WHERE pool = ?1 AND identity = ?2
"#;
