-- History retention (`[history] retain`, README "Data model"): final
-- intents older than the retention period leave in bounded batches, with
-- their attempts, feed rows and dead letters, by one node at a time.

-- A delete of intents raised the nonce floor once per row (the row-level
-- trigger below): a retention batch of 1,000 rows of one submitter wrote
-- its cursor row up to 1,000 times. One statement-level trigger raises each
-- submitter's floor once per statement, past the highest nonce deleted: the
-- same floor as before (the highest deleted nonce + 1, never lowered), so
-- the derived next nonce still never goes back below a nonce handed out.
CREATE FUNCTION managed_tx_keep_nonce_floor_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE submitter_nonce_cursor c
       SET next_nonce = g.top + 1, updated_at = now()
      FROM (SELECT chain_id, submitter, max(nonce) AS top
              FROM gone WHERE nonce IS NOT NULL
             GROUP BY chain_id, submitter) g
     WHERE c.chain_id = g.chain_id AND c.submitter = g.submitter
       AND c.next_nonce <= g.top;
    RETURN NULL;
END;
$$;

DROP TRIGGER managed_tx_nonce_row_deleted ON managed_tx;
CREATE TRIGGER managed_tx_nonce_rows_deleted
    AFTER DELETE ON managed_tx
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION managed_tx_keep_nonce_floor_deleted();

-- Deleting an intent checks the foreign key of `funds_top_up`: without an
-- index that check read the whole table once per deleted intent.
CREATE INDEX funds_top_up_tx_idx ON funds_top_up (tx_id);

-- Retention's progress, one row: where the running pass stands (a pass
-- walks `managed_tx` in primary-key order, which for UUIDv7 ids is
-- creation order, up to the pass's cutoff), the cutoff of the last pass
-- that reached its end (every intent created before it and removable was
-- removed: a missing id older than it "aged out"), and the last round.
CREATE TABLE history_retention (
    id               BOOLEAN     PRIMARY KEY DEFAULT true CHECK (id),
    pass_cutoff      TIMESTAMPTZ,
    resume_after     UUID,
    completed_cutoff TIMESTAMPTZ,
    completed_at     TIMESTAMPTZ,
    last_round_at    TIMESTAMPTZ,
    last_round_node  TEXT        CHECK (length(last_round_node) BETWEEN 1 AND 64),
    last_round_rows  BIGINT      NOT NULL DEFAULT 0 CHECK (last_round_rows >= 0),
    removed_total    BIGINT      NOT NULL DEFAULT 0 CHECK (removed_total >= 0)
);
INSERT INTO history_retention DEFAULT VALUES;
