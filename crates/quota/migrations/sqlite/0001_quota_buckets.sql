-- proxypool-quota, SQLite: the fixed-window quota buckets.
--
-- Same columns and invariants as the PostgreSQL table. STRICT makes the column types real
-- (no text smuggled into an integer column). Receipts are a JSON array stored as SQLite's
-- binary JSONB (3.45+), like PostgreSQL's jsonb: a decision on a full bucket searches and
-- counts up to 1000 receipts, and walking JSONB costs far less than re-parsing JSON text.

CREATE TABLE quota_buckets (
    project_id           TEXT    NOT NULL,
    subject_id           TEXT    NOT NULL,
    operation            TEXT    NOT NULL,
    window_started_at_ms INTEGER NOT NULL,
    consumed_count       INTEGER NOT NULL,
    receipt_ids          BLOB    NOT NULL,
    updated_at_ms        INTEGER NOT NULL,

    PRIMARY KEY (project_id, subject_id, operation),

    -- Key sizes; the character rules are checked in code before any SQL (validate.rs).
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
        CHECK (consumed_count BETWEEN 1 AND 1000),
    -- CASE, in this order: json_type and json_array_length raise on malformed JSONB
    -- (json_valid flag 8: strictly well-formed JSONB).
    CONSTRAINT quota_buckets_receipts_match_count
        CHECK (CASE WHEN NOT json_valid(receipt_ids, 8) THEN 0
                    WHEN json_type(receipt_ids) = 'array'
                    THEN json_array_length(receipt_ids) = consumed_count
                    ELSE 0 END),
    CONSTRAINT quota_buckets_receipts_size
        CHECK (length(receipt_ids) <= 262144)
) STRICT, WITHOUT ROWID;
