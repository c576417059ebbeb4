-- The spend ledger's horizon (README "Guardrails", issue 47): each node's
-- longest configured spend window, registered at start and at every
-- reload. The ledger's pruner, on every node, keeps each row younger than
-- the longest window any node has registered, so one node's shorter
-- setting (its windows, formerly its `feed.retain`) can never delete a row
-- another node's window still counts. A node's row outlives its process:
-- it may come back with the same configuration and count the same rows.
-- With no row at all nothing is pruned.
CREATE TABLE spend_ledger_horizon (
    node_id    TEXT        PRIMARY KEY,
    window_ms  BIGINT      NOT NULL CHECK (window_ms >= 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
