-- A webhook holder re-reads one submitter's events it had to park (more of
-- them waited than it keeps in memory, behind a head the receiver refuses):
-- by submitter, in feed order.
CREATE INDEX tx_completion_submitter_idx ON tx_completion (chain_id, submitter, xid, seq);
