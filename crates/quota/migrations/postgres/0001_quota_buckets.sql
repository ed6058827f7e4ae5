-- proxypool-quota, PostgreSQL: the fixed-window quota buckets.
--
-- One row per (project, subject, operation). Receipts live in the same row as the count and
-- reset with it, so "count == number of receipts" is an invariant the database holds, not a
-- hope. The table sits in its own schema: the quota role gets USAGE on it and nothing that
-- lets it create objects, whatever the server's defaults for the public schema are.

CREATE SCHEMA IF NOT EXISTS proxypool_quota;

CREATE TABLE proxypool_quota.quota_buckets (
    project_id           text    NOT NULL,
    subject_id           text    NOT NULL,
    operation            text    NOT NULL,
    window_started_at_ms bigint  NOT NULL,
    consumed_count       integer NOT NULL,
    receipt_ids          jsonb   NOT NULL,
    updated_at_ms        bigint  NOT NULL,

    CONSTRAINT quota_buckets_pkey PRIMARY KEY (project_id, subject_id, operation),

    -- Key sizes. The character rules are checked in code before any SQL (validate.rs);
    -- repeating them here as regular expressions cost more server CPU per decision than the
    -- whole rest of the statement's constraints, for no writer but that code.
    CONSTRAINT quota_buckets_project_id_length
        CHECK (char_length(project_id) BETWEEN 1 AND 128),
    CONSTRAINT quota_buckets_subject_id_length
        CHECK (char_length(subject_id) BETWEEN 1 AND 255),
    CONSTRAINT quota_buckets_operation_known
        CHECK (operation IN ('extract', 'inspect', 'admin')),

    CONSTRAINT quota_buckets_window_started_non_negative
        CHECK (window_started_at_ms >= 0),
    CONSTRAINT quota_buckets_updated_after_window_start
        CHECK (updated_at_ms >= window_started_at_ms),
    CONSTRAINT quota_buckets_consumed_count_range
        CHECK (consumed_count BETWEEN 1 AND 1000),
    -- CASE, not AND: jsonb_array_length raises on a non-array, and AND does not promise to
    -- evaluate the type test first.
    CONSTRAINT quota_buckets_receipts_match_count
        CHECK (CASE WHEN jsonb_typeof(receipt_ids) = 'array'
                    THEN jsonb_array_length(receipt_ids) = consumed_count
                    ELSE false END),
    CONSTRAINT quota_buckets_receipts_size
        CHECK (octet_length(receipt_ids::text) <= 262144)
);

COMMENT ON TABLE proxypool_quota.quota_buckets IS
    'Durable fixed-window quota: one row per (project, subject, operation); see proxypool-quota.';
