-- Resubmission, fee bumps, STUCK and operator actions (DESIGN.md section 10).

-- Resubmits claimed so far (re-broadcasts and bumps): STUCK after max_resubmits.
ALTER TABLE managed_tx ADD COLUMN resubmits INTEGER NOT NULL DEFAULT 0 CHECK (resubmits >= 0);
-- First time a node accepted an attempt: STUCK after stuck_after without a receipt.
ALTER TABLE managed_tx ADD COLUMN first_broadcast_at TIMESTAMPTZ;
-- An operator's request waiting for the leader (any node records it; the
-- leader claims it, fenced, together with next_resubmit_at).
ALTER TABLE managed_tx ADD COLUMN requested_action TEXT
    CHECK (requested_action IN ('cancel', 'speedup', 'rebroadcast'));
-- Who asked for it and why, for the audit log of the leader that acts.
ALTER TABLE managed_tx ADD COLUMN requested_by TEXT CHECK (length(requested_by) <= 128);

-- The resubmit claim's scan: accepted, unmined intents by due time.
CREATE INDEX managed_tx_resubmit_idx ON managed_tx (chain_id, submitter, next_resubmit_at)
    WHERE state IN ('TRACKING', 'STUCK') AND receipt IS NULL;

-- Operator actions on single transactions are audited too.
ALTER TABLE ops_audit ADD COLUMN tx_id UUID;
