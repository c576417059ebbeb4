-- Operator actions (restart, unprotect, reload): who, what, why, where.
CREATE TABLE ops_audit (
    id        BIGSERIAL   PRIMARY KEY,
    at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor     TEXT        NOT NULL,   -- token name, never the token
    action    TEXT        NOT NULL,
    submitter TEXT,                   -- lower-case 0x address, when the action has one
    reason    TEXT,
    node_id   TEXT
);

CREATE INDEX ops_audit_at ON ops_audit (at);
