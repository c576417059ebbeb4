-- Attempt hashes through a hash index, still unique (README "Data model
-- and leases": sizing; README "Benchmark": history).
--
-- `tx_attempt.tx_hash` is looked up by equality only (GET by hash, the
-- receipt and reorg joins, the acceptance write), and its values are
-- random: every insert into the unique B-tree of the 66-character text
-- lands on a random leaf. Once history fills that B-tree (~100 MB per
-- million attempts, ~240 MB as live inserts leave it), an insert is a page
-- read from outside `shared_buffers` and, after each checkpoint, a full
-- 8 KB page image in the WAL. A hash index stores a 4-byte hash code per
-- row instead of the text: measured on 2 million attempts (PostgreSQL 15,
-- 10,000 inserts right after a CHECKPOINT), 73 MB instead of 237 MB, 2.25
-- instead of 5.49 KB of WAL per insert, and about half the time per
-- insert. `wal_compression = lz4` on the B-tree gave 4.85 KB: hex text
-- does not compress much.
--
-- Uniqueness stays: an exclusion constraint on the hash index refuses a
-- second row with the same hash, as the unique constraint did (SQLSTATE
-- 23P01 instead of 23505; nothing in txmgr matches either, and no foreign
-- key or ON CONFLICT names this key).
--
-- Adding the constraint builds its index under an ACCESS EXCLUSIVE lock on
-- `tx_attempt` (an exclusion constraint cannot be attached to an index
-- built CONCURRENTLY): a few seconds per million attempts (8.7 s for 2.2
-- million on the 2-core machine while it compiled), during which
-- broadcasts wait. The old index is dropped in the same transaction.
ALTER TABLE tx_attempt
    ADD CONSTRAINT tx_attempt_tx_hash_excl EXCLUDE USING hash (tx_hash WITH =);
ALTER TABLE tx_attempt DROP CONSTRAINT tx_attempt_tx_hash_key;
