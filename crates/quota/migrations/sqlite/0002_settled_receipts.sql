-- proxypool-quota, SQLite: receipts that can be settled after their decision.
--
-- As on PostgreSQL: a settled charge can leave a bucket with no charge in its window, the
-- decision records whether it charged or replayed in the row it writes (its RETURNING reads
-- it back), and namespaced receipts need a larger size bound. SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt (in the migration's transaction).

CREATE TABLE quota_buckets_next (
    project_id           TEXT    NOT NULL,
    subject_id           TEXT    NOT NULL,
    operation            TEXT    NOT NULL,
    window_started_at_ms INTEGER NOT NULL,
    consumed_count       INTEGER NOT NULL,
    receipt_ids          BLOB    NOT NULL,
    updated_at_ms        INTEGER NOT NULL,
    last_decision_charged INTEGER NOT NULL DEFAULT 1,

    PRIMARY KEY (project_id, subject_id, operation),

    CONSTRAINT quota_buckets_project_id_length
        CHECK (length(project_id) BETWEEN 1 AND 128),
    CONSTRAINT quota_buckets_subject_id_length
        CHECK (length(subject_id) BETWEEN 1 AND 255),
    CONSTRAINT quota_buckets_operation_known
        CHECK (operation IN ('extract', 'inspect', 'admin')),

    CONSTRAINT quota_buckets_window_started_non_negative
        CHECK (window_started_at_ms >= 0),
    CONSTRAINT quota_buckets_updated_after_window_start
        CHECK (updated_at_ms >= window_started_at_ms),
    CONSTRAINT quota_buckets_consumed_count_range
        CHECK (consumed_count BETWEEN 0 AND 1000),
    CONSTRAINT quota_buckets_receipts_match_count
        CHECK (CASE WHEN NOT json_valid(receipt_ids, 8) THEN 0
                    WHEN json_type(receipt_ids) = 'array'
                    THEN json_array_length(receipt_ids) = consumed_count
                    ELSE 0 END),
    CONSTRAINT quota_buckets_receipts_size
        CHECK (length(receipt_ids) <= 327680),
    CONSTRAINT quota_buckets_last_decision_charged_bool
        CHECK (last_decision_charged IN (0, 1))
) STRICT, WITHOUT ROWID;

INSERT INTO quota_buckets_next
    (project_id, subject_id, operation,
     window_started_at_ms, consumed_count, receipt_ids, updated_at_ms)
SELECT project_id, subject_id, operation,
       window_started_at_ms, consumed_count, receipt_ids, updated_at_ms
FROM quota_buckets;

DROP TABLE quota_buckets;

ALTER TABLE quota_buckets_next RENAME TO quota_buckets;
