//! The SQL the PostgreSQL backend runs, in one place so it can be read (and quoted) whole.
//!
//! Parameters of the decision: `$1` project, `$2` subject, `$3` operation, `$4` receipt,
//! `$5` window length in ms, `$6` limit (the read uses `$1..$3` and `$4` = window; the
//! settlements are described with them). Every number comes back as `bigint` so the row
//! decodes the same way on any path.

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
/// Two additions keep a bucket under pressure cheap. When the statement's snapshot (taken
/// as the statement starts) already shows the bucket full in the current window without
/// this receipt, the answer is "exceeded" as of that moment:
/// - the upsert is skipped (`WHERE NOT EXISTS` on its `SELECT`), so a denial takes no row
///   lock and writes nothing;
/// - the second branch returns that snapshot row (`admitted = 0`), so a denial is one round
///   trip, not a decision plus a separate read.
///
/// Within a window a full bucket changes only by a settlement ([`REFUND`], [`SPEND`]) or
/// by replays, which change nothing; a refund that commits after the snapshot frees a slot
/// for the next decision, and this one is ordered before it, as a decision that started
/// first may be.
///
/// Whether the decision charged the receipt or replayed it is known only under the row
/// lock, so the upsert writes it into `last_decision_charged` and its `RETURNING` reads it
/// back: the row as this very statement wrote it, whatever ran before or after.
///
/// Output: one row `(admitted, charged, count, receipts, reset_at_ms, observed_at_ms)`: the
/// upsert's `RETURNING` (`admitted = 1`), or the snapshot row (`admitted = 0`), or no row. The
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
         window_started_at_ms, consumed_count, receipt_ids, updated_at_ms,
         last_decision_charged)
    SELECT $1, $2, $3,
           clock.now_ms - clock.now_ms % $5::bigint, 1, jsonb_build_array($4::text),
           clock.now_ms, true
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
        updated_at_ms = GREATEST(bucket.updated_at_ms, excluded.updated_at_ms),
        last_decision_charged = CASE
            WHEN bucket.window_started_at_ms < excluded.window_started_at_ms THEN true
            WHEN bucket.receipt_ids ? $4::text THEN false
            ELSE true END
    WHERE bucket.window_started_at_ms < excluded.window_started_at_ms
       OR bucket.receipt_ids ? $4::text
       OR bucket.consumed_count < $6::bigint
    RETURNING bucket.consumed_count,
              jsonb_array_length(bucket.receipt_ids) AS receipt_count,
              bucket.window_started_at_ms,
              bucket.last_decision_charged
)
SELECT 1::bigint,
       CASE WHEN decided.last_decision_charged THEN 1 ELSE 0 END::bigint,
       decided.consumed_count::bigint,
       decided.receipt_count::bigint,
       (decided.window_started_at_ms + $5::bigint)::bigint,
       clock.now_ms
FROM decided, clock
UNION ALL
SELECT 0::bigint,
       0::bigint,
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

/// Refunds a charge: removes the receipt and lowers the count by one, in one `UPDATE` that
/// takes the bucket's row lock (so it serializes with decisions) and applies only while
/// the charge's window is the current one on the database clock and still holds the
/// receipt. Parameters: `$1..$3` the bucket, `$4` receipt, `$5` the charge's window start,
/// `$6` window length in ms. Returns one row when it applied, none otherwise.
pub(crate) const REFUND: &str = r#"
WITH clock AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
UPDATE proxypool_quota.quota_buckets AS bucket SET
    consumed_count = bucket.consumed_count - 1,
    receipt_ids = bucket.receipt_ids - $4::text,
    updated_at_ms = GREATEST(bucket.updated_at_ms, clock.now_ms)
FROM clock
WHERE bucket.project_id = $1 AND bucket.subject_id = $2 AND bucket.operation = $3
  AND bucket.window_started_at_ms = $5::bigint
  AND clock.now_ms - clock.now_ms % $6::bigint = $5::bigint
  AND bucket.receipt_ids ? $4::text
RETURNING 1::bigint
"#;

/// Spends a charge: the receipt is replaced by `$7` (appended last, like any charge), the
/// count stays. Same conditions as [`REFUND`], and `$7` must not be charged already.
pub(crate) const SPEND: &str = r#"
WITH clock AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
UPDATE proxypool_quota.quota_buckets AS bucket SET
    receipt_ids = (bucket.receipt_ids - $4::text) || jsonb_build_array($7::text),
    updated_at_ms = GREATEST(bucket.updated_at_ms, clock.now_ms)
FROM clock
WHERE bucket.project_id = $1 AND bucket.subject_id = $2 AND bucket.operation = $3
  AND bucket.window_started_at_ms = $5::bigint
  AND clock.now_ms - clock.now_ms % $6::bigint = $5::bigint
  AND bucket.receipt_ids ? $4::text
  AND NOT bucket.receipt_ids ? $7::text
RETURNING 1::bigint
"#;

/// The store ledger's entry of a pool (`$1`): identity, generation, lost_at_ms, hold_ms,
/// loss, installed; no row when the pool has none. (Every store-ledger statement is run by
/// `crate::sql_ledger`, which says what each one means.)
pub(crate) const LEDGER_LOAD: &str = r#"
SELECT identity, generation, lost_at_ms, hold_ms, loss, installed
FROM proxypool_quota.store_ledger
WHERE pool = $1
"#;

/// The first entry of a pool: `$1` pool, `$2..$7` the entry's columns. A row back when it
/// inserted; none when the pool already had an entry (unchanged).
pub(crate) const LEDGER_INSERT: &str = r#"
INSERT INTO proxypool_quota.store_ledger
    (pool, identity, generation, lost_at_ms, hold_ms, loss, installed, updated_at_ms)
VALUES ($1, $2, $3::bigint, $4::bigint, $5::bigint, $6, $7,
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
ON CONFLICT (pool) DO NOTHING
RETURNING 1::bigint
"#;

/// The compare-and-set of an entry: `$1` pool, `$2` the identity the caller expects it to
/// name, `$3..$8` the new entry's columns. A row back when it wrote; none when the entry
/// names another identity or there is none. A writer that waited for a concurrent one's
/// row lock re-checks `identity = $2` against the row that one committed.
pub(crate) const LEDGER_UPDATE: &str = r#"
UPDATE proxypool_quota.store_ledger SET
    identity = $3,
    generation = $4::bigint,
    lost_at_ms = $5::bigint,
    hold_ms = $6::bigint,
    loss = $7,
    installed = $8,
    updated_at_ms = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE pool = $1 AND identity = $2
RETURNING 1::bigint
"#;

/// Raises the generation of the entry of pool `$1` to `$3` if it names identity `$2`; never
/// lowers it.
pub(crate) const LEDGER_RAISE: &str = r#"
UPDATE proxypool_quota.store_ledger SET
    generation = GREATEST(generation, $3::bigint),
    updated_at_ms = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE pool = $1 AND identity = $2
"#;
