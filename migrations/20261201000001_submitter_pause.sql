-- Pause (README "Guardrails"): while a row exists, the submitter allocates
-- no nonce on that chain. The allocation reads it in the statement that
-- locks the nonce cursors, so a pause committed before an allocation is
-- obeyed by it, on whichever node the leader runs.
CREATE TABLE submitter_pause (
    chain_id       BIGINT      NOT NULL,
    submitter      TEXT        NOT NULL,   -- lower-case 0x address
    reason         TEXT        NOT NULL,
    halt_resubmits BOOLEAN     NOT NULL DEFAULT false,
    paused_by      TEXT        NOT NULL,   -- token name, never the token
    paused_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, submitter)
);
