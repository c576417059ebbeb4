-- no-transaction
-- The ops page's transaction view reads a transaction's feed rows by its
-- id. Built without blocking the feed's writers.
CREATE INDEX CONCURRENTLY IF NOT EXISTS tx_completion_by_tx ON tx_completion (tx_id)
    WHERE tx_id IS NOT NULL;
