-- An intent's first signed attempt is written on its own row, by the
-- allocation that draws its nonce (README "Data model and leases", issue
-- 28): the separate attempt row was one row version (and two index
-- entries) per intent on the way out. Insert, allocation with the signed
-- bytes, acceptance: three row versions per intent.
--
-- `tx_attempt` stays what every reader reads — every signed byte string,
-- persisted before it is broadcast — as a view over the two places an
-- attempt is kept:
--
-- * on its intent's row (`first_*` columns): attempt 1, signed with the
--   row's nonce, kind `original`, written with the allocation the leader
--   drew and signed before writing it;
-- * in `tx_attempt_rest`: every other attempt (replacements, attempts
--   persisted after their allocation, attempts written before this
--   migration, and a row's attempt once its nonce left the row).
--
-- A row's attempt belongs to the nonce on the row: when the nonce leaves
-- (released, rejected, requeued), the trigger below moves the attempt into
-- `tx_attempt_rest` (attempt 1, as it was) in the same statement, so an
-- attempt never changes its nonce and the history is never lost. An
-- allocation writes the attempt on the row only when the intent has no
-- attempt yet.
ALTER TABLE tx_attempt RENAME TO tx_attempt_rest;

-- Nullable columns without a default: no rewrite, a brief lock only. Their
-- checks are added NOT VALID (no scan under the lock; enforced from now on)
-- and validated by the next migration.
ALTER TABLE managed_tx
    ADD COLUMN first_tx_hash TEXT,
    ADD COLUMN first_raw_tx BYTEA,
    ADD COLUMN first_max_fee_per_gas NUMERIC(78, 0),
    ADD COLUMN first_max_priority_fee_per_gas NUMERIC(78, 0),
    ADD COLUMN first_gas_price NUMERIC(78, 0),
    ADD COLUMN first_gas_limit BIGINT,
    ADD COLUMN first_broadcast_result TEXT,
    ADD COLUMN first_fencing_token BIGINT;
ALTER TABLE managed_tx ADD CONSTRAINT managed_tx_first_attempt_whole CHECK (
    (first_tx_hash IS NULL AND first_raw_tx IS NULL AND first_gas_limit IS NULL
     AND first_fencing_token IS NULL AND first_broadcast_result IS NULL
     AND first_max_fee_per_gas IS NULL AND first_max_priority_fee_per_gas IS NULL
     AND first_gas_price IS NULL)
    OR (first_tx_hash ~ '^0x[0-9a-f]{64}$' AND first_raw_tx IS NOT NULL AND nonce IS NOT NULL
        AND first_gas_limit > 0 AND first_fencing_token > 0
        AND ((first_gas_price IS NULL AND first_max_fee_per_gas >= 0
              AND first_max_priority_fee_per_gas >= 0)
             OR (first_gas_price >= 0 AND first_max_fee_per_gas IS NULL
                 AND first_max_priority_fee_per_gas IS NULL)))) NOT VALID;

-- Lookups by hash (receipt matching, the API) find a row's attempt here;
-- the allocation writes a new entry anyway (its nonce changes), the
-- acceptance does not touch the column and stays HOT.
CREATE UNIQUE INDEX managed_tx_first_tx_hash_key ON managed_tx (first_tx_hash)
    WHERE first_tx_hash IS NOT NULL;

CREATE VIEW tx_attempt AS
    SELECT tx_id, 1 AS attempt_no, nonce, first_tx_hash AS tx_hash, first_raw_tx AS raw_tx,
           first_max_fee_per_gas AS max_fee_per_gas,
           first_max_priority_fee_per_gas AS max_priority_fee_per_gas,
           first_gas_price AS gas_price, first_gas_limit AS gas_limit, 'original'::text AS kind,
           first_broadcast_result AS broadcast_result, allocated_at AS created_at,
           first_fencing_token AS fencing_token
      FROM managed_tx
     WHERE first_tx_hash IS NOT NULL
    UNION ALL
    SELECT tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas, max_priority_fee_per_gas,
           gas_price, gas_limit, kind, broadcast_result, created_at, fencing_token
      FROM tx_attempt_rest;

-- Writes through the view (an older node during a rolling upgrade, tools):
-- an insert goes to `tx_attempt_rest`; an update may change an attempt's
-- `broadcast_result` only.
CREATE FUNCTION tx_attempt_view_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tx_attempt_rest (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                                 max_priority_fee_per_gas, gas_price, gas_limit, kind,
                                 broadcast_result, created_at, fencing_token)
    VALUES (NEW.tx_id, NEW.attempt_no, NEW.nonce, NEW.tx_hash, NEW.raw_tx, NEW.max_fee_per_gas,
            NEW.max_priority_fee_per_gas, NEW.gas_price, NEW.gas_limit, NEW.kind,
            NEW.broadcast_result, COALESCE(NEW.created_at, now()), NEW.fencing_token);
    RETURN NEW;
END;
$$;
CREATE TRIGGER tx_attempt_view_insert INSTEAD OF INSERT ON tx_attempt
    FOR EACH ROW EXECUTE FUNCTION tx_attempt_view_insert();

CREATE FUNCTION tx_attempt_view_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF ROW(NEW.tx_id, NEW.attempt_no, NEW.nonce, NEW.tx_hash, NEW.raw_tx, NEW.max_fee_per_gas,
           NEW.max_priority_fee_per_gas, NEW.gas_price, NEW.gas_limit, NEW.kind, NEW.created_at,
           NEW.fencing_token)
       IS DISTINCT FROM
       ROW(OLD.tx_id, OLD.attempt_no, OLD.nonce, OLD.tx_hash, OLD.raw_tx, OLD.max_fee_per_gas,
           OLD.max_priority_fee_per_gas, OLD.gas_price, OLD.gas_limit, OLD.kind, OLD.created_at,
           OLD.fencing_token) THEN
        RAISE EXCEPTION 'a signed attempt is never changed, only its broadcast_result'
            USING ERRCODE = 'check_violation';
    END IF;
    UPDATE managed_tx SET first_broadcast_result = NEW.broadcast_result
     WHERE tx_id = OLD.tx_id AND first_tx_hash = OLD.tx_hash;
    IF NOT FOUND THEN
        UPDATE tx_attempt_rest SET broadcast_result = NEW.broadcast_result
         WHERE tx_hash = OLD.tx_hash;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER tx_attempt_view_update INSTEAD OF UPDATE ON tx_attempt
    FOR EACH ROW EXECUTE FUNCTION tx_attempt_view_update();

-- A row's attempt moves to `tx_attempt_rest` when the nonce leaves the row.
CREATE FUNCTION managed_tx_move_first_attempt() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tx_attempt_rest (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                                 max_priority_fee_per_gas, gas_price, gas_limit, kind,
                                 broadcast_result, created_at, fencing_token)
    VALUES (OLD.tx_id, 1, OLD.nonce, OLD.first_tx_hash, OLD.first_raw_tx,
            OLD.first_max_fee_per_gas, OLD.first_max_priority_fee_per_gas, OLD.first_gas_price,
            OLD.first_gas_limit, 'original',
            -- The answer an acceptance left in `accepted_hash` is written out.
            COALESCE(OLD.first_broadcast_result,
                     CASE WHEN OLD.accepted_hash = OLD.first_tx_hash THEN 'accepted' END),
            COALESCE(OLD.allocated_at, now()), OLD.first_fencing_token);
    NEW.first_tx_hash := NULL;
    NEW.first_raw_tx := NULL;
    NEW.first_max_fee_per_gas := NULL;
    NEW.first_max_priority_fee_per_gas := NULL;
    NEW.first_gas_price := NULL;
    NEW.first_gas_limit := NULL;
    NEW.first_broadcast_result := NULL;
    NEW.first_fencing_token := NULL;
    RETURN NEW;
END;
$$;
CREATE TRIGGER managed_tx_first_attempt_leaves_with_nonce
    BEFORE UPDATE OF nonce ON managed_tx
    FOR EACH ROW
    WHEN (OLD.first_tx_hash IS NOT NULL AND OLD.nonce IS DISTINCT FROM NEW.nonce)
    EXECUTE FUNCTION managed_tx_move_first_attempt();
