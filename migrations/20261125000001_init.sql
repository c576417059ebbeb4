-- txmgr schema, version 1. PostgreSQL is the authority (DESIGN.md section 4).
-- Addresses are lower-case 0x hex, hashes 0x hex, amounts NUMERIC(78,0) (uint256),
-- raw transactions BYTEA. Every table keyed by submitter carries chain_id in its key.

-- Leadership per submitter: who may write, and the fencing token that proves it.
CREATE TABLE submitter_lease (
    chain_id      BIGINT      NOT NULL CHECK (chain_id > 0),
    submitter     TEXT        NOT NULL CHECK (submitter ~ '^0x[0-9a-f]{40}$'),
    owner_node    TEXT        NOT NULL CHECK (length(owner_node) BETWEEN 1 AND 64),
    -- Only ever increases: incremented on every change of ownership.
    fencing_token BIGINT      NOT NULL CHECK (fencing_token > 0),
    expires_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, submitter)
);

-- The next nonce to hand out, nonces given back, and the PROTECT flag.
CREATE TABLE submitter_nonce_cursor (
    chain_id       BIGINT      NOT NULL CHECK (chain_id > 0),
    submitter      TEXT        NOT NULL CHECK (submitter ~ '^0x[0-9a-f]{40}$'),
    next_nonce     BIGINT      NOT NULL CHECK (next_nonce >= 0),
    -- Nonces below next_nonce given back and not yet reused, ascending.
    released       BIGINT[]    NOT NULL DEFAULT '{}',
    -- Non-null = PROTECT: the submitter refuses new work until an operator clears it.
    protect_reason TEXT,
    fencing_token  BIGINT      NOT NULL CHECK (fencing_token > 0),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, submitter)
);

-- One row per accepted intent.
CREATE TABLE managed_tx (
    tx_id                UUID        PRIMARY KEY,
    chain_id             BIGINT      NOT NULL CHECK (chain_id > 0),
    submitter            TEXT        NOT NULL CHECK (submitter ~ '^0x[0-9a-f]{40}$'),
    request_id           TEXT        CHECK (length(request_id) BETWEEN 1 AND 256),
    -- sha256 of the canonical intent: tells an idempotent replay from a conflict.
    request_hash         BYTEA       NOT NULL CHECK (length(request_hash) = 32),
    intent               JSONB       NOT NULL,
    nonce                BIGINT      CHECK (nonce >= 0),
    state                TEXT        NOT NULL CHECK (state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK',
                                                               'CONFIRMED', 'FAILED_FINAL', 'REJECTED', 'CANCELLED')),
    sub_state            TEXT        CHECK (sub_state ~ '^[a-z_]{1,32}$'),
    tx_hash              TEXT        CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    mined_tx_hash        TEXT        CHECK (mined_tx_hash ~ '^0x[0-9a-f]{64}$'),
    receipt              JSONB,
    receipt_block_number BIGINT      CHECK (receipt_block_number >= 0),
    receipt_block_hash   TEXT        CHECK (receipt_block_hash ~ '^0x[0-9a-f]{64}$'),
    submit_attempts      INTEGER     NOT NULL DEFAULT 0 CHECK (submit_attempts >= 0),
    last_submit_at       TIMESTAMPTZ,
    next_resubmit_at     TIMESTAMPTZ,
    last_error           TEXT,
    -- Token of the last fenced write (NULL while QUEUED: inserting an intent is not critical).
    fencing_token        BIGINT      CHECK (fencing_token > 0),
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    confirmed_at         TIMESTAMPTZ,
    -- Acceptance order: nonces go to QUEUED intents in this order.
    ingress_seq          BIGINT      GENERATED ALWAYS AS IDENTITY,
    -- A QUEUED intent has no nonce; an intent that reached the chain keeps its nonce.
    CONSTRAINT managed_tx_queued_has_no_nonce CHECK (state <> 'QUEUED' OR nonce IS NULL),
    CONSTRAINT managed_tx_in_flight_has_nonce
        CHECK (state NOT IN ('ALLOCATED', 'TRACKING', 'STUCK', 'CONFIRMED', 'FAILED_FINAL') OR nonce IS NOT NULL),
    -- A receipt is recorded whole or not at all.
    CONSTRAINT managed_tx_receipt_whole CHECK (
        (receipt IS NULL AND receipt_block_number IS NULL AND receipt_block_hash IS NULL AND mined_tx_hash IS NULL)
        OR (receipt IS NOT NULL AND receipt_block_number IS NOT NULL AND receipt_block_hash IS NOT NULL
            AND mined_tx_hash IS NOT NULL)),
    CONSTRAINT managed_tx_final_has_receipt CHECK (state NOT IN ('CONFIRMED', 'FAILED_FINAL') OR receipt IS NOT NULL)
);
CREATE UNIQUE INDEX managed_tx_request_id_key ON managed_tx (chain_id, submitter, request_id)
    WHERE request_id IS NOT NULL;
CREATE UNIQUE INDEX managed_tx_nonce_key ON managed_tx (chain_id, submitter, nonce)
    WHERE nonce IS NOT NULL;
-- The allocator's scan: oldest QUEUED intents of one submitter.
CREATE INDEX managed_tx_queued_idx ON managed_tx (chain_id, submitter, ingress_seq)
    WHERE state = 'QUEUED';
-- Work discovery and recovery: non-terminal intents by state.
CREATE INDEX managed_tx_open_idx ON managed_tx (state, chain_id, submitter)
    WHERE state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK');
CREATE INDEX managed_tx_tx_hash_idx ON managed_tx (tx_hash) WHERE tx_hash IS NOT NULL;
-- Listing one submitter's intents page by page.
CREATE INDEX managed_tx_listing_idx ON managed_tx (chain_id, submitter, ingress_seq);

-- Every signed byte string ever produced, persisted before it is broadcast.
CREATE TABLE tx_attempt (
    tx_id                    UUID        NOT NULL REFERENCES managed_tx (tx_id),
    attempt_no               INTEGER     NOT NULL CHECK (attempt_no >= 1),
    nonce                    BIGINT      NOT NULL CHECK (nonce >= 0),
    tx_hash                  TEXT        NOT NULL UNIQUE CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    raw_tx                   BYTEA       NOT NULL,
    max_fee_per_gas          NUMERIC(78, 0) CHECK (max_fee_per_gas >= 0),
    max_priority_fee_per_gas NUMERIC(78, 0) CHECK (max_priority_fee_per_gas >= 0),
    gas_price                NUMERIC(78, 0) CHECK (gas_price >= 0),
    gas_limit                BIGINT      NOT NULL CHECK (gas_limit > 0),
    kind                     TEXT        NOT NULL CHECK (kind IN ('original', 'rebroadcast', 'bump', 'cancel')),
    broadcast_result         TEXT,
    created_at               TIMESTAMPTZ NOT NULL DEFAULT now(),
    fencing_token            BIGINT      NOT NULL CHECK (fencing_token > 0),
    PRIMARY KEY (tx_id, attempt_no),
    -- Either EIP-1559 fees or a legacy gas price, never both.
    CONSTRAINT tx_attempt_fee_shape CHECK (
        (gas_price IS NULL AND max_fee_per_gas IS NOT NULL AND max_priority_fee_per_gas IS NOT NULL)
        OR (gas_price IS NOT NULL AND max_fee_per_gas IS NULL AND max_priority_fee_per_gas IS NULL))
);

-- The completion feed. Served only below the snapshot xmin and paged by (xid, seq),
-- so a reader never skips a row whose transaction commits late (DESIGN.md section 4).
CREATE TABLE tx_completion (
    seq          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid          XID8        NOT NULL DEFAULT pg_current_xact_id(),
    tx_id        UUID        NOT NULL REFERENCES managed_tx (tx_id),
    chain_id     BIGINT      NOT NULL CHECK (chain_id > 0),
    submitter    TEXT        NOT NULL CHECK (submitter ~ '^0x[0-9a-f]{40}$'),
    request_id   TEXT,
    state        TEXT        NOT NULL CHECK (state IN ('CONFIRMED', 'FAILED_FINAL', 'REJECTED', 'CANCELLED', 'STUCK')),
    completed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX tx_completion_feed_idx ON tx_completion (xid, seq);

-- Cluster membership: one row per running node, heartbeated.
CREATE TABLE txmgr_node (
    node_id      TEXT        PRIMARY KEY CHECK (length(node_id) BETWEEN 1 AND 64),
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    http_addr    TEXT,
    version      TEXT        NOT NULL
);
