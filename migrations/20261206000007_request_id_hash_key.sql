-- The request-id key through a hash index, still unique per submitter
-- (README "Idempotency"; README "Benchmark": history).
--
-- `(chain_id, submitter, request_id)` is looked up by equality only (the
-- create's idempotency arbiter, the lookup of the intent a create lost
-- to, `GET /v1/transactions?request_id=`), and request ids are mostly
-- random (UUIDs). With history in the table, every create inserted into
-- the unique B-tree on the three columns (~100 MB per million intents, the
-- largest index of `managed_tx`) lands on a random leaf: a page read from
-- outside `shared_buffers` and, after each checkpoint, a full 8 KB page
-- image in the WAL. A hash index stores a 4-byte hash code per row. A hash
-- index has one column, so the key is one expression of the three:
-- `chain_id::text || '/' || submitter || '/' || request_id`, which is
-- injective (neither a decimal chain id nor a hex address holds a `/`), so
-- two rows clash exactly when all three columns are equal. Measured on 2
-- million rows of random UUID request ids over 3 chains x 1,000 submitters
-- (PostgreSQL 15): 96 MB instead of 218 MB, and 2,631 instead of 4,993
-- bytes of WAL per insert (heap included) for 10,000 inserts right after a
-- CHECKPOINT (bench/HISTORY.md).
--
-- Uniqueness stays: an exclusion constraint on the hash index refuses a
-- second row with the same key, and `INSERT ... ON CONFLICT ON CONSTRAINT
-- managed_tx_request_id_excl DO NOTHING` takes it as its arbiter, skipping
-- a duplicate (concurrent duplicates included) as the unique index did. A
-- row without a request id (NULL) clashes with nothing, as before. Every
-- read by request id is written with the same expression, so it is a scan
-- of this index.
--
-- Adding the constraint builds its index under an ACCESS EXCLUSIVE lock on
-- `managed_tx` (an exclusion constraint cannot be attached to an index
-- built CONCURRENTLY): a few seconds per million intents, during which
-- creates and every state change wait. The old index is dropped in the
-- same transaction.
ALTER TABLE managed_tx
    ADD CONSTRAINT managed_tx_request_id_excl
    EXCLUDE USING hash ((chain_id::text || '/' || submitter || '/' || request_id) WITH =);
DROP INDEX managed_tx_request_id_key;
