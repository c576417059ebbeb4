-- The build each node runs (issue 51): its commit and the newest migration
-- it knows, beside the release already in `version`, so `/v1/ops/cluster`
-- shows a cluster mid-upgrade and which nodes are older than the schema.
-- Expand only: nullable columns without a default (no rewrite, a brief
-- lock); a 0.1.0 node's INSERT names neither and leaves them NULL.
ALTER TABLE txmgr_node
    ADD COLUMN IF NOT EXISTS build_commit   TEXT CHECK (length(build_commit) <= 64),
    ADD COLUMN IF NOT EXISTS schema_version BIGINT;
