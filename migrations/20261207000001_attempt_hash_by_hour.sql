-- Attempt hashes found through an index ordered by the hour the attempt
-- was signed (README "Data model and leases"; README "Benchmark":
-- history). Replaces the hash index of migration 20261206000006.
--
-- A hash is random: in any index keyed by the hash alone (the unique
-- B-tree of the first schema, the hash index after it) every insert lands
-- on a random page of an index as large as the whole history, so once the
-- history outgrows memory each new attempt costs a page read and, after
-- every checkpoint, a full 8 KB page image in the WAL. Measured here
-- (PostgreSQL 15, 11 million attempts over 30 days, inserts of 64 rows
-- right after a CHECKPOINT): 5.8 KB of WAL per insert with the hash index,
-- 0.5 KB with this one (4.2 vs 0.27 KB over 30,000 inserts), in half the
-- time. Keyed by (hour, hash) the inserts of an hour share a few pages at
-- the right edge of the index whatever the history holds; both indexes
-- are the same size (~30 bytes per attempt: the hour and the hash's first
-- 8 bytes, not its 66-character text).
--
-- What it costs:
--   * The only lookup by hash alone (GET /v1/ops/transactions/{hash}) probes
--     every hour from the oldest attempt's to now, one descent each: ~720
--     with the default 30-day retention (a few milliseconds), ~8,800 for a
--     year kept. Every other read or write of an attempt names its intent
--     (`tx_id`, the primary key), as the engine's writes all do.
--   * A hash is no longer unique in the database. Two rows with the same
--     hash would be the same signed bytes recorded twice; the engine never
--     does (an attempt is written once, under its intent's fenced key
--     (tx_id, attempt_no)), and the lookup by hash answers the one intent
--     such rows would share.
--
-- Built plainly, not CONCURRENTLY (several nodes may migrate at once:
-- migration 20261201000010): it holds writes to `tx_attempt` for the build,
-- about 1.5 s per million attempts on the 2-core machine.
CREATE INDEX IF NOT EXISTS tx_attempt_hash_by_hour ON tx_attempt (
    date_trunc('hour', created_at AT TIME ZONE 'UTC'),
    (('x' || substr(tx_hash, 3, 16))::bit(64)::bigint));
ALTER TABLE tx_attempt DROP CONSTRAINT IF EXISTS tx_attempt_tx_hash_excl;
