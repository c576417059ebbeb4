-- `paused` joins the sub-states: a QUEUED intent of a paused submitter as
-- the reads show it (README "Guardrails"). The reads derive it from the
-- pause; the constraint lists every SubState so the two sets stay one.
-- NOT VALID (no scan), validated next.
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
        'expired', 'spend_limited', 'paused'
    )
) NOT VALID;
