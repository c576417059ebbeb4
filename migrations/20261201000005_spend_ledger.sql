-- The spend ledger (README "Guardrails"): one row per intent given a nonce
-- under a submitter's spend_limit, with the value it sends. The allocation
-- sums a submitter's rows of the rolling window while it holds the
-- submitter's nonce cursor lock, so allocations of one (chain, submitter)
-- are serialised across every node and the window's total never exceeds
-- the limit; the rows outlive fail-overs and restarts.
CREATE TABLE spend_ledger (
    tx_id     UUID           PRIMARY KEY,
    chain_id  BIGINT         NOT NULL,
    submitter TEXT           NOT NULL,
    value     NUMERIC(78, 0) NOT NULL CHECK (value >= 0),
    at        TIMESTAMPTZ    NOT NULL DEFAULT now()
);
CREATE INDEX spend_ledger_window ON spend_ledger (chain_id, submitter, at);

-- `spend_limited` joins the sub-states: QUEUED waiting for room under the
-- limit, or REJECTED after spend_wait. NOT VALID (no scan), validated next.
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
        'expired', 'spend_limited'
    )
) NOT VALID;
