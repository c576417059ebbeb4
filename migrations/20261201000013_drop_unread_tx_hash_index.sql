-- managed_tx.tx_hash (the newest attempt's hash) is never looked up: a
-- lookup by hash goes through tx_attempt's unique tx_hash index, which
-- holds every attempt's hash. Its index cost an entry at every update of a
-- row with a hash (acceptance, each re-broadcast, receipt, finality),
-- none of which is HOT since each changes the state (README "Benchmark").
DROP INDEX IF EXISTS managed_tx_tx_hash_idx;
