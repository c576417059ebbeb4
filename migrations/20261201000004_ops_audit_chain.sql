-- The chain of an audited action on a submitter or a transaction (several
-- chains: one address may be a submitter on each); NULL for node-wide
-- actions (reload, webhook redelivery) and for rows written before.
ALTER TABLE ops_audit ADD COLUMN chain_id BIGINT;
