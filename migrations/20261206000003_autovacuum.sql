-- Autovacuum per hot table (README "Data model and leases": sizing).
--
-- PostgreSQL vacuums a table once its dead rows pass 50 + 20 % of its rows
-- (`autovacuum_vacuum_scale_factor` 0.2) and analyzes it at 10 %. With
-- history retention, `managed_tx`, `tx_attempt` and `tx_completion` hold
-- `history.retain` worth of intents — about 260 million rows each at a
-- steady 100 intents/s and 30 days — so the default would wait for ~50
-- million dead rows (retention's deletes, the engine's updates) before a
-- vacuum, and the table and its indexes would bloat by a fifth in between.
-- 1 % waits for ~2.6 million at that size: a vacuum every few hours, each
-- short. Inserts alone also trigger one at 2 % (PostgreSQL 13+,
-- `autovacuum_vacuum_insert_scale_factor`, default 20 %), which marks the
-- new pages all-visible and freezes them early, so index-only scans stay
-- index-only and no anti-wraparound vacuum has to read the whole table
-- later. Statistics follow at 1 %: the planner sees the table's real size.
--
-- `ALTER TABLE … SET (…)` takes a SHARE UPDATE EXCLUSIVE lock: reads and
-- writes go on while it runs; it only changes the catalog.
ALTER TABLE managed_tx SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE tx_attempt SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE tx_completion SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE ops_audit SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02);
