-- A reorg deeper than finality is healed (README "Receipts, finality and
-- reorgs"): a final intent whose block left the canonical chain is tracked
-- again, and the feed gets a correction row REORGED_OUT before its new
-- terminal row.
ALTER TABLE tx_completion DROP CONSTRAINT tx_completion_state_check;
ALTER TABLE tx_completion
    ADD CONSTRAINT tx_completion_state_check CHECK (state IN (
        'CONFIRMED', 'FAILED_FINAL', 'REJECTED', 'CANCELLED', 'STUCK', 'REORGED_OUT',
        'LOW_BALANCE', 'BALANCE_RESTORED'));

-- The final intents above a reorg's fork block are found without scanning
-- every final intent of the chain.
CREATE INDEX managed_tx_final_block_idx ON managed_tx (chain_id, receipt_block_number)
    WHERE state IN ('CONFIRMED', 'FAILED_FINAL', 'CANCELLED') AND receipt_block_number IS NOT NULL;
