-- The ops page's transaction view reads a transaction's feed rows by its
-- id. A plain build (not CONCURRENTLY: several nodes may migrate at once,
-- and a concurrent build waits for their migration transactions, which
-- wait for its advisory lock — a deadlock); it holds the feed's writers
-- for the build, seconds for a month of rows.
CREATE INDEX IF NOT EXISTS tx_completion_by_tx ON tx_completion (tx_id)
    WHERE tx_id IS NOT NULL;
