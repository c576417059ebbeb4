-- Fees in the spend limit (README "Guardrails"): each ledger row also holds
-- its intent's worst-case fees, `gas_limit × max_fee_per_gas` (legacy:
-- `× gas_price`) of its dearest attempt, raised by every attempt signed for
-- it (bumps and cancels too), and what it paid once its receipt is recorded
-- (`gas_used × effective_gas_price`, plus an L2's `l1Fee`). A row counts
-- `COALESCE(fees_paid, fees_reserved)`: a reorg clears `fees_paid` and the
-- reservation counts again. Constant defaults: no table rewrite.
ALTER TABLE spend_ledger
    ADD COLUMN fees_reserved NUMERIC(78, 0) NOT NULL DEFAULT 0
        CONSTRAINT spend_ledger_fees_reserved_nonnegative CHECK (fees_reserved >= 0),
    ADD COLUMN fees_paid NUMERIC(78, 0)
        CONSTRAINT spend_ledger_fees_paid_nonnegative CHECK (fees_paid >= 0);
