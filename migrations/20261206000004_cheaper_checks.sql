-- Cheaper CHECK constraints (issue 48): the same rules, a tenth of the CPU.
--
-- PostgreSQL evaluates every CHECK constraint of a table on every row
-- version written, whatever columns changed. A bounded repetition such as
-- `x ~ '^0x[0-9a-f]{64}$'` compiles to a large automaton and cost ~10 µs per
-- evaluation here (100,000 hashes: 1,019 ms, against 120 ms for
-- `length(x) = 66 AND x ~ '^0x[0-9a-f]+$'`, which accepts exactly the same
-- strings). `managed_tx` alone carried five of them (submitter, three
-- hashes, sub-state), paid on each of an intent's row versions, and every
-- lease renewal paid one on `submitter_lease`.
--
-- Each constraint keeps its name (errors and tests name it). It is added
-- NOT VALID here (a short lock, no scan: new and updated rows are checked at
-- once) and validated by the next migration, which scans the table without
-- blocking writes; every existing row passed the old, equivalent rule.

ALTER TABLE funds_top_up
    DROP CONSTRAINT funds_top_up_funder_check,
    ADD CONSTRAINT funds_top_up_funder_check CHECK (length(funder) = 42 AND funder ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT funds_top_up_submitter_check,
    ADD CONSTRAINT funds_top_up_submitter_check CHECK (length(submitter) = 42 AND submitter ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE managed_tx
    DROP CONSTRAINT managed_tx_mined_tx_hash_check,
    ADD CONSTRAINT managed_tx_mined_tx_hash_check CHECK (length(mined_tx_hash) = 66 AND mined_tx_hash ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT managed_tx_receipt_block_hash_check,
    ADD CONSTRAINT managed_tx_receipt_block_hash_check CHECK (length(receipt_block_hash) = 66 AND receipt_block_hash ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT managed_tx_sub_state_check,
    ADD CONSTRAINT managed_tx_sub_state_check CHECK (length(sub_state) BETWEEN 1 AND 32 AND sub_state ~ '^[a-z_]+$') NOT VALID,
    DROP CONSTRAINT managed_tx_submitter_check,
    ADD CONSTRAINT managed_tx_submitter_check CHECK (length(submitter) = 42 AND submitter ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT managed_tx_tx_hash_check,
    ADD CONSTRAINT managed_tx_tx_hash_check CHECK (length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE submitter_funds
    DROP CONSTRAINT submitter_funds_submitter_check,
    ADD CONSTRAINT submitter_funds_submitter_check CHECK (length(submitter) = 42 AND submitter ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE submitter_lease
    DROP CONSTRAINT submitter_lease_submitter_check,
    ADD CONSTRAINT submitter_lease_submitter_check CHECK (length(submitter) = 42 AND submitter ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE submitter_nonce_cursor
    DROP CONSTRAINT submitter_nonce_cursor_submitter_check,
    ADD CONSTRAINT submitter_nonce_cursor_submitter_check CHECK (length(submitter) = 42 AND submitter ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE tx_attempt
    DROP CONSTRAINT tx_attempt_tx_hash_check,
    ADD CONSTRAINT tx_attempt_tx_hash_check CHECK (length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE tx_completion
    DROP CONSTRAINT tx_completion_submitter_check,
    ADD CONSTRAINT tx_completion_submitter_check CHECK (length(submitter) = 42 AND submitter ~ '^0x[0-9a-f]+$') NOT VALID,
    DROP CONSTRAINT tx_completion_tx_hash_check,
    ADD CONSTRAINT tx_completion_tx_hash_check CHECK (length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]+$') NOT VALID;
ALTER TABLE webhook_cursor
    DROP CONSTRAINT webhook_cursor_webhook_check,
    ADD CONSTRAINT webhook_cursor_webhook_check CHECK (length(webhook) BETWEEN 1 AND 64 AND webhook ~ '^[A-Za-z0-9_.-]+$') NOT VALID;
