-- proxypool-quota, PostgreSQL: receipts that can be settled after their decision.
--
-- A charge can now be undone (the service failed the request: the receipt is removed and
-- the count drops by one) or kept while its receipt is freed (the request was refused for
-- the client's own reasons: the receipt is renamed, so the same key is charged again). A
-- bucket can therefore hold no charge at all in its window, and the decision must tell a
-- new charge from a replay, which only the statement that holds the row lock knows: it
-- records that in the row it writes and reads it back in the same statement.
--
-- Receipts are namespaced by the caller (a client's key and a server request id can never
-- collide), which makes the longest receipt a few bytes longer than a bare key: the size
-- bound grows to keep a full bucket of the longest receipts.

ALTER TABLE proxypool_quota.quota_buckets
    ADD COLUMN last_decision_charged boolean NOT NULL DEFAULT true,
    DROP CONSTRAINT quota_buckets_consumed_count_range,
    ADD CONSTRAINT quota_buckets_consumed_count_range
        CHECK (consumed_count BETWEEN 0 AND 1000),
    DROP CONSTRAINT quota_buckets_receipts_size,
    ADD CONSTRAINT quota_buckets_receipts_size
        CHECK (octet_length(receipt_ids::text) <= 327680);
