-- One lease owner per process (issue 12 item 8). node_id is what operators
-- configure and read; every process also draws a random instance id at start.
-- Renewals, releases, hand-overs and the fence compare node_id and instance,
-- so two processes sharing a node_id never share a lease or its token, and a
-- restarted process takes its predecessor's leases over with a new token.
-- '' marks rows written before this migration: no process has that
-- instance, so such a lease is only ever taken over (token + 1) once expired.
ALTER TABLE submitter_lease
    ADD COLUMN owner_instance TEXT NOT NULL DEFAULT ''
        CHECK (length(owner_instance) <= 64);

-- The process registered under a node_id: only it heartbeats or removes the
-- row, and a second live process with the same node_id is refused at start.
ALTER TABLE txmgr_node
    ADD COLUMN instance TEXT NOT NULL DEFAULT ''
        CHECK (length(instance) <= 64);
