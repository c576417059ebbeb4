-- managed_tx.tx_hash (the newest attempt's hash) is never looked up: a
-- lookup by hash goes through tx_attempt's unique tx_hash index, which
-- holds every attempt's hash. Its index cost an entry at every non-HOT
-- update of a row with a hash (acceptance, bumps, receipt, finality: each
-- changes the state or the resubmit time, which other indexes cover;
-- README "Benchmark").
DROP INDEX IF EXISTS managed_tx_tx_hash_idx;
