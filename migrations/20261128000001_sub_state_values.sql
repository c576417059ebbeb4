-- Sub-states are one closed set (issue 14): the `SubState` enum of
-- actors/src/domain/sub_state.rs, written as text. Any other value is
-- refused from now on; NULL (no sub-state) stays allowed.
--
-- Every value any version of txmgr has written is in the list (from the
-- history of the engine's SQL and of every sub-state passed from Rust), so
-- the rows of an existing database pass:
--   awaiting_receipt, mined, reorged             receipts and reorgs
--   fee_bumped, cancelling                       replacement signed
--   fee_cap_reached, cancel_at_fee_cap           replacement refused by the caps
--   stuck_stuck_after, stuck_max_resubmits       STUCK ('stuck_' + setting name)
--   nonce_consumed_externally                    its nonce went to another key's transaction
--   cancelled_by_operator, requeued_by_operator  operator actions
--   filler, filler_not_included                  fillers of released nonces
-- A row with a value no version wrote (edited by hand) makes the next
-- migration fail, naming this constraint: fix the row, then start again.
--
-- Added NOT VALID here (a short lock, no scan: new and updated rows are
-- checked at once) and validated by the next migration, which scans the
-- table without blocking writes.
ALTER TABLE managed_tx ADD CONSTRAINT managed_tx_sub_state_known CHECK (
    sub_state IS NULL OR sub_state IN (
        'awaiting_receipt', 'mined', 'reorged',
        'fee_bumped', 'cancelling',
        'fee_cap_reached', 'cancel_at_fee_cap',
        'stuck_stuck_after', 'stuck_max_resubmits',
        'nonce_consumed_externally',
        'cancelled_by_operator', 'requeued_by_operator',
        'filler', 'filler_not_included'
    )
) NOT VALID;
