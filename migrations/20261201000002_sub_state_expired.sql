-- `expired` joins the closed set of sub-states (actors/src/domain/sub_state.rs):
-- an intent whose valid_until passed before it was given a nonce
-- (REJECTED), or whose cancel at its deadline was mined (CANCELLED).
-- NOT VALID here (a short lock, no scan), validated by the next migration.
ALTER TABLE managed_tx DROP CONSTRAINT managed_tx_sub_state_known;
ALTER TABLE managed_tx ADD CONSTRAINT managed_tx_sub_state_known CHECK (
    sub_state IS NULL OR sub_state IN (
        'awaiting_receipt', 'mined', 'reorged',
        'fee_bumped', 'cancelling',
        'fee_cap_reached', 'cancel_at_fee_cap',
        'stuck_stuck_after', 'stuck_max_resubmits',
        'nonce_consumed_externally',
        'cancelled_by_operator', 'requeued_by_operator',
        'filler', 'filler_not_included',
        'expired'
    )
) NOT VALID;
