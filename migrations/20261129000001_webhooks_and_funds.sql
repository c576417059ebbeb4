-- Push delivery (webhooks) and funds monitoring (README "Webhooks", "Funds").

-- The feed gains funds events: a row is either a transaction's completion
-- (tx_id set) or a submitter's balance crossing its threshold (tx_id NULL).
-- Transaction rows also keep what a receiver is told about the transaction
-- as it stood at the transition (a later change does not rewrite history).
ALTER TABLE tx_completion ALTER COLUMN tx_id DROP NOT NULL;
ALTER TABLE tx_completion DROP CONSTRAINT tx_completion_state_check;
ALTER TABLE tx_completion
    ADD CONSTRAINT tx_completion_state_check CHECK (state IN (
        'CONFIRMED', 'FAILED_FINAL', 'REJECTED', 'CANCELLED', 'STUCK', 'LOW_BALANCE', 'BALANCE_RESTORED')),
    ADD COLUMN tx_hash         TEXT           CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    ADD COLUMN block_number    BIGINT         CHECK (block_number >= 0),
    ADD COLUMN nonce           BIGINT         CHECK (nonce >= 0),
    ADD COLUMN reason          TEXT,
    ADD COLUMN balance_wei     NUMERIC(78, 0) CHECK (balance_wei >= 0),
    ADD COLUMN min_balance_wei NUMERIC(78, 0) CHECK (min_balance_wei >= 0),
    ADD CONSTRAINT tx_completion_kind CHECK (
        (state IN ('LOW_BALANCE', 'BALANCE_RESTORED')) = (tx_id IS NULL)
        AND (state IN ('LOW_BALANCE', 'BALANCE_RESTORED')) = (balance_wei IS NOT NULL));

-- Per-submitter funds state, written only by the submitter's fenced leader:
-- `low` flips once per crossing, and the flip writes the feed row in the
-- same transaction, so several nodes never report one crossing twice.
CREATE TABLE submitter_funds (
    chain_id        BIGINT         NOT NULL CHECK (chain_id > 0),
    submitter       TEXT           NOT NULL CHECK (submitter ~ '^0x[0-9a-f]{40}$'),
    low             BOOLEAN        NOT NULL,
    balance_wei     NUMERIC(78, 0) NOT NULL CHECK (balance_wei >= 0),
    min_balance_wei NUMERIC(78, 0) NOT NULL CHECK (min_balance_wei >= 0),
    -- Number of downward crossings so far: names the top-up of each one.
    crossings       BIGINT         NOT NULL DEFAULT 0 CHECK (crossings >= 0),
    checked_at      TIMESTAMPTZ    NOT NULL DEFAULT now(),
    fencing_token   BIGINT         NOT NULL CHECK (fencing_token > 0),
    PRIMARY KEY (chain_id, submitter)
);

-- Top-ups sent for a submitter (the funder's intent), for the daily cap.
CREATE TABLE funds_top_up (
    chain_id   BIGINT         NOT NULL CHECK (chain_id > 0),
    submitter  TEXT           NOT NULL CHECK (submitter ~ '^0x[0-9a-f]{40}$'),
    funder     TEXT           NOT NULL CHECK (funder ~ '^0x[0-9a-f]{40}$'),
    request_id TEXT           NOT NULL,
    tx_id      UUID           NOT NULL REFERENCES managed_tx (tx_id),
    value_wei  NUMERIC(78, 0) NOT NULL CHECK (value_wei > 0),
    created_at TIMESTAMPTZ    NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, submitter, request_id)
);

-- One row per configured webhook: its lease (same rules as submitter
-- leases) and its durable position in the feed. Every event at or before
-- (cursor_xid, cursor_seq) was delivered or dead-lettered.
CREATE TABLE webhook_cursor (
    chain_id          BIGINT      NOT NULL CHECK (chain_id > 0),
    webhook           TEXT        NOT NULL CHECK (webhook ~ '^[A-Za-z0-9_.-]{1,64}$'),
    owner_node        TEXT        NOT NULL CHECK (length(owner_node) BETWEEN 1 AND 64),
    owner_instance    TEXT        NOT NULL DEFAULT '',
    fencing_token     BIGINT      NOT NULL CHECK (fencing_token > 0),
    expires_at        TIMESTAMPTZ NOT NULL,
    cursor_xid        XID8        NOT NULL DEFAULT '0',
    cursor_seq        BIGINT      NOT NULL DEFAULT 0,
    delivered         BIGINT      NOT NULL DEFAULT 0,
    failed_attempts   BIGINT      NOT NULL DEFAULT 0,
    last_delivered_at TIMESTAMPTZ,
    last_error        TEXT,
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, webhook)
);

-- Events delivered (or dead-lettered) beyond the cursor while earlier ones
-- of other submitters were still pending; folded into the cursor as soon
-- as everything before them is done. A new holder skips them.
CREATE TABLE webhook_done (
    chain_id BIGINT NOT NULL,
    webhook  TEXT   NOT NULL,
    xid      XID8   NOT NULL,
    seq      BIGINT NOT NULL,
    PRIMARY KEY (chain_id, webhook, xid, seq)
);

-- Events given up on after max_attempts (or refused with a 4xx).
CREATE TABLE webhook_dead_letter (
    id              BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain_id        BIGINT      NOT NULL CHECK (chain_id > 0),
    webhook         TEXT        NOT NULL,
    delivery_id     TEXT        NOT NULL,
    feed_seq        BIGINT      NOT NULL REFERENCES tx_completion (seq),
    attempts        INTEGER     NOT NULL CHECK (attempts >= 0),
    last_status     INTEGER,
    last_error      TEXT        NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Set by an operator's redeliver; cleared when the holder takes it up.
    redeliver_asked TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    UNIQUE (chain_id, webhook, feed_seq)
);
CREATE INDEX webhook_dead_letter_open_idx ON webhook_dead_letter (chain_id, webhook)
    WHERE delivered_at IS NULL;
