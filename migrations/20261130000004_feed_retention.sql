-- Feed retention (feed.retain): the oldest rows are found by time, a batch at
-- a time, without walking the feed.
CREATE INDEX tx_completion_completed_at_idx ON tx_completion (completed_at);
-- Rows a dead letter refers to are kept; retention looks them up by seq.
CREATE INDEX webhook_dead_letter_feed_seq_idx ON webhook_dead_letter (feed_seq);
