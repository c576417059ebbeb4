-- One index entry fewer per accepted intent (README "Benchmark", issue 28).
--
-- The allocator's queue read had its own partial index on
-- (chain_id, submitter, ingress_seq) for QUEUED rows, beside the open-work
-- index on (phase, chain_id, submitter) for QUEUED and in-flight rows: the
-- insert of every intent wrote an entry into both. The open-work index now
-- ends in `ingress_seq`, so a submitter's QUEUED intents are one range of it
-- in acceptance order — the queue read's scan, without a sort — and the
-- queue's own index goes. Every other reader of the open-work index names
-- the same leading columns as before. `ingress_seq` never changes, so the
-- acceptance stays an in-place (HOT) update.
--
-- Building the index reads the whole table under a SHARE lock (inserts wait
-- for it; README "Data model and leases").
DROP INDEX managed_tx_queued_idx;
DROP INDEX managed_tx_open_idx;
CREATE INDEX managed_tx_open_idx ON managed_tx (phase, chain_id, submitter, ingress_seq)
    WHERE phase <= 1;
