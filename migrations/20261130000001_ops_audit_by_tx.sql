-- A client's speed-up of one intent is allowed once per resubmit interval:
-- the check reads the intent's latest `tx_speedup` audit row, which must
-- not scan the whole (ever-growing) audit table.
CREATE INDEX ops_audit_by_tx ON ops_audit (tx_id, at) WHERE tx_id IS NOT NULL;
