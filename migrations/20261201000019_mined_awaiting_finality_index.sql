-- The finality workers read only the mined intents awaiting finality
-- (README "Receipts, finality and reorgs", issue 28).
--
-- On every head, each finality worker asks for the in-flight intents of its
-- leaders that have a receipt. No index named those rows alone: the read
-- went through the open-work index, which also holds every unmined
-- in-flight intent, and dropped the ones without a receipt after reading
-- each row — on every head, however few were mined. This index holds only
-- the mined in-flight intents, keyed as the read asks (and, on a reorg,
-- by the fork's block).
--
-- The receipt's update already writes an entry into every index of the row
-- (it changes `receipt`, which another index's predicate names), so this
-- index adds one entry per mined intent and turns no in-place (HOT) update
-- into another kind. Building it reads the whole table under a SHARE lock
-- (inserts wait for it; README "Data model and leases").
CREATE INDEX managed_tx_mined_idx ON managed_tx (chain_id, submitter, receipt_block_number)
    WHERE phase = 1 AND receipt IS NOT NULL;
