-- proxypool-quota, SQLite: the durable ledger of the pool stores.
--
-- Same columns and rules as the PostgreSQL table: one row per pool store (named by its
-- Redis key prefix) with the identity of its current incarnation, the highest generation
-- it is known to have reached, the recovery in force after a loss and why the incarnation
-- was started, and whether a controller has installed it. STRICT makes the column types
-- real; `installed` is 0 or 1 (STRICT has no boolean type).

CREATE TABLE store_ledger (
    pool          TEXT    NOT NULL,
    identity      TEXT    NOT NULL,
    generation    INTEGER NOT NULL,
    lost_at_ms    INTEGER NULL,
    hold_ms       INTEGER NULL,
    loss          TEXT    NULL,
    installed     INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,

    PRIMARY KEY (pool),

    -- 1-128 printable ASCII characters (space to tilde).
    CONSTRAINT store_ledger_pool_shape
        CHECK (length(CAST(pool AS BLOB)) BETWEEN 1 AND 128
               AND pool NOT GLOB '*[^ -~]*'),
    CONSTRAINT store_ledger_identity_shape
        CHECK (length(CAST(identity AS BLOB)) = 32
               AND identity NOT GLOB '*[^0-9A-Fa-f]*'),
    CONSTRAINT store_ledger_generation_non_negative
        CHECK (generation >= 0),
    -- A recovery is both of its numbers or neither.
    CONSTRAINT store_ledger_recovery_whole
        CHECK ((lost_at_ms IS NULL) = (hold_ms IS NULL)),
    CONSTRAINT store_ledger_recovery_non_negative
        CHECK (lost_at_ms >= 0 AND hold_ms >= 0),
    CONSTRAINT store_ledger_loss_known
        CHECK (loss IN ('missing', 'replaced', 'rolled_back', 'forced')),
    CONSTRAINT store_ledger_installed_bool
        CHECK (installed IN (0, 1))
) STRICT, WITHOUT ROWID;
