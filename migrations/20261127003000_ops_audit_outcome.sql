-- Whether an audited operator action took effect (issue 12 item 2).
-- An action whose effect is a database write (unprotect, the transaction
-- actions) writes its row in that same transaction, as 'done': both commit or
-- neither. An action on a node's running state (restart, reload) writes
-- 'started' before it acts and 'done' or 'failed' after: no action runs
-- without a row, and no row claims an action that failed. A row left at
-- 'started' means the outcome could not be recorded (see the node's log).
-- Rows written before this column have NULL.
ALTER TABLE ops_audit ADD COLUMN outcome TEXT
    CHECK (outcome IN ('started', 'done', 'failed'));
