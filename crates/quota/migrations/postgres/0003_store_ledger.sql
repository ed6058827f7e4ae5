-- proxypool-quota, PostgreSQL: the durable ledger of the pool stores.
--
-- One row per pool store (named by its Redis key prefix): the identity of its current
-- incarnation, the highest generation it is known to have reached, the recovery in force
-- after a loss and why that incarnation was started, and whether a controller has
-- installed it in the store. It lives here, beside the quota, because a pool store that
-- lost its memory cannot be trusted to remember that it did (proxypool_core::store_mark).
--
-- Every write is one compare-and-set statement on the identity. The code checks every
-- value before any SQL and again when it reads a row back; the constraints keep any other
-- writer to the same rules. The quota role gets SELECT, INSERT and UPDATE, as on the
-- buckets: no entry is ever deleted.

CREATE TABLE proxypool_quota.store_ledger (
    pool          text    NOT NULL,
    identity      text    NOT NULL,
    generation    bigint  NOT NULL,
    lost_at_ms    bigint  NULL,
    hold_ms       bigint  NULL,
    loss          text    NULL,
    installed     boolean NOT NULL,
    updated_at_ms bigint  NOT NULL,

    CONSTRAINT store_ledger_pkey PRIMARY KEY (pool),

    -- 1-128 printable ASCII characters (space to tilde).
    CONSTRAINT store_ledger_pool_shape
        CHECK (octet_length(pool) BETWEEN 1 AND 128 AND pool ~ '^[ -~]+$'),
    CONSTRAINT store_ledger_identity_shape
        CHECK (identity ~ '^[0-9A-Fa-f]{32}$'),
    CONSTRAINT store_ledger_generation_non_negative
        CHECK (generation >= 0),
    -- A recovery is both of its numbers or neither.
    CONSTRAINT store_ledger_recovery_whole
        CHECK ((lost_at_ms IS NULL) = (hold_ms IS NULL)),
    CONSTRAINT store_ledger_recovery_non_negative
        CHECK (lost_at_ms >= 0 AND hold_ms >= 0),
    CONSTRAINT store_ledger_loss_known
        CHECK (loss IN ('missing', 'replaced', 'rolled_back', 'forced'))
);

COMMENT ON TABLE proxypool_quota.store_ledger IS
    'The durable identity and highest generation of each pool store; see proxypool-quota.';
