-- The acceptance update (ALLOCATED -> TRACKING) becomes a HOT update: a new
-- row version on the same page and no index entries (README "Benchmark").
--
-- PostgreSQL can update a row in place only when no column that an index
-- names (as a key, in an expression or in its predicate) changes. Four
-- indexes named `state`, and the resubmit index had `next_resubmit_at` as
-- a key: the acceptance changes both, so it wrote an entry into every index
-- of the row (six). The indexes now name `phase`, a stored column computed
-- from `state` that is the same for ALLOCATED, TRACKING and STUCK, and the
-- resubmit index is keyed by nonce (the resubmit scan filters by time among
-- a submitter's unmined intents, which `max_in_flight` bounds). Queries keep
-- their `state` conditions and add the matching `phase` condition so the
-- planner can use the partial indexes.
--
-- The table keeps a quarter of each page free for the in-place versions.
-- Adding a stored column rewrites the table (an ACCESS EXCLUSIVE lock for
-- its duration: README "Upgrading").
ALTER TABLE managed_tx ADD COLUMN phase SMALLINT NOT NULL GENERATED ALWAYS AS (
    CASE state
        WHEN 'QUEUED' THEN 0
        WHEN 'ALLOCATED' THEN 1
        WHEN 'TRACKING' THEN 1
        WHEN 'STUCK' THEN 1
        WHEN 'REJECTED' THEN 3
        ELSE 2 -- CONFIRMED, FAILED_FINAL, CANCELLED
    END) STORED;
ALTER TABLE managed_tx SET (fillfactor = 75);

DROP INDEX managed_tx_queued_idx;
CREATE INDEX managed_tx_queued_idx ON managed_tx (chain_id, submitter, ingress_seq)
    WHERE phase = 0;
DROP INDEX managed_tx_open_idx;
CREATE INDEX managed_tx_open_idx ON managed_tx (phase, chain_id, submitter)
    WHERE phase <= 1;
DROP INDEX managed_tx_resubmit_idx;
CREATE INDEX managed_tx_resubmit_idx ON managed_tx (chain_id, submitter, nonce)
    WHERE phase = 1 AND receipt IS NULL;
DROP INDEX managed_tx_final_block_idx;
CREATE INDEX managed_tx_final_block_idx ON managed_tx (chain_id, receipt_block_number)
    WHERE phase = 2 AND receipt_block_number IS NOT NULL;
