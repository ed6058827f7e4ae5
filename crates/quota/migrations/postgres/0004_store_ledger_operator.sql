-- proxypool-quota, PostgreSQL: the operator's say over the store ledger.
--
-- `proxypool store acknowledge` (end a recovery before its hold) and `proxypool store
-- recover` (start one as if the store had been lost) are the operator's orders. They are
-- written as the table's owner: the role `proxypool migrate` runs as, or a member of it
-- (a superuser counts as every role). The runtime role (`migrate --create-role`) keeps
-- INSERT and UPDATE on the table, because the controllers record the store's identity,
-- its generation and the losses they detect; this trigger holds each of its writes to
-- what a controller does:
--
-- * the first entry of a pool carries no loss;
-- * the same incarnation: its loss stays; its recovery stays, or grows longer (to at
--   most a day, the longest a proxy lives), or ends once its hold is over by the
--   database's clock; once installed it stays installed; the generation never goes down
--   (a lower one keeps the stored one, as the raise does);
-- * a new incarnation: only after a loss a controller detects (missing, replaced,
--   rolled_back; never forced), not yet installed, at a higher generation, with a
--   recovery of at most a day that starts at the database's clock.
--
-- So the runtime role cannot end a recovery early, shorten or backdate one, or record an
-- operator's forced recovery; a controller also never installs a recovery shorter than
-- its own configuration's (proxypool-controller's store guard). Refusals are SQLSTATE
-- 42501 (insufficient_privilege). The owner's writes pass unchecked: that is how an
-- order reaches the ledger, and the guards read it within a second, as every entry.
--
-- search_path is pinned to pg_catalog, so a role that may create objects somewhere on
-- its own path cannot stand in a function or an operator of its own for the ones used
-- here.

CREATE FUNCTION proxypool_quota.store_ledger_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
DECLARE
    now_ms constant bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    -- The longest hold: a day, the longest lifetime the pool gives a proxy.
    longest_hold_ms constant bigint := 86400000;
    is_operator boolean;
BEGIN
    SELECT pg_has_role(current_user, class.relowner, 'USAGE') INTO is_operator
    FROM pg_class AS class
    WHERE class.oid = TG_RELID;
    IF is_operator THEN
        RETURN NEW;
    END IF;

    IF TG_OP = 'INSERT' THEN
        IF NEW.loss IS NOT NULL THEN
            RAISE EXCEPTION 'store ledger: a first entry records no loss'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.pool IS DISTINCT FROM OLD.pool THEN
        RAISE EXCEPTION 'store ledger: an entry keeps its pool'
            USING ERRCODE = 'insufficient_privilege';
    END IF;

    IF NEW.identity = OLD.identity THEN
        IF NEW.loss IS DISTINCT FROM OLD.loss THEN
            RAISE EXCEPTION 'store ledger: the loss of an incarnation does not change'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF (NEW.lost_at_ms, NEW.hold_ms) IS DISTINCT FROM (OLD.lost_at_ms, OLD.hold_ms) THEN
            IF OLD.lost_at_ms IS NULL THEN
                RAISE EXCEPTION 'store ledger: a recovery starts only with a new incarnation after a loss; an operator forces one (proxypool store recover)'
                    USING ERRCODE = 'insufficient_privilege';
            ELSIF NEW.lost_at_ms IS NULL THEN
                IF OLD.lost_at_ms + OLD.hold_ms > now_ms THEN
                    RAISE EXCEPTION 'store ledger: a recovery ends before its hold only by an operator (proxypool store acknowledge)'
                        USING ERRCODE = 'insufficient_privilege';
                END IF;
            ELSIF NEW.lost_at_ms <> OLD.lost_at_ms
                  OR NEW.hold_ms < OLD.hold_ms
                  OR NEW.hold_ms > longest_hold_ms THEN
                RAISE EXCEPTION 'store ledger: a recovery may only grow longer, to at most a day'
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END IF;
        IF OLD.installed AND NOT NEW.installed THEN
            RAISE EXCEPTION 'store ledger: an installed incarnation stays installed'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        NEW.generation := GREATEST(NEW.generation, OLD.generation);
        RETURN NEW;
    END IF;

    -- A new incarnation.
    IF NEW.loss IS NULL OR NEW.loss NOT IN ('missing', 'replaced', 'rolled_back') THEN
        RAISE EXCEPTION 'store ledger: a new incarnation follows a loss a controller detected; only an operator forces one (proxypool store recover)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.installed THEN
        RAISE EXCEPTION 'store ledger: a new incarnation is recorded before it is installed'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.generation <= OLD.generation THEN
        RAISE EXCEPTION 'store ledger: a new incarnation starts above the generation it follows'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.hold_ms IS NULL OR NEW.hold_ms > longest_hold_ms THEN
        RAISE EXCEPTION 'store ledger: a new incarnation carries a recovery of at most a day'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Not earlier (a recovery that would be over at once) nor later than the record.
    NEW.lost_at_ms := now_ms;
    RETURN NEW;
END
$$;

CREATE TRIGGER store_ledger_guard
    BEFORE INSERT OR UPDATE ON proxypool_quota.store_ledger
    FOR EACH ROW EXECUTE FUNCTION proxypool_quota.store_ledger_guard();

COMMENT ON FUNCTION proxypool_quota.store_ledger_guard() IS
    'Holds the runtime role''s writes of the store ledger to what a controller does; the owner''s orders pass. See proxypool-quota.';
