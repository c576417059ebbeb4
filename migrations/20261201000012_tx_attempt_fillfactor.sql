-- An attempt row is updated once, milliseconds after its insert (the
-- broadcast answer, `broadcast_result`, which no index covers). With full
-- pages the new version had to go to another page, writing an entry in
-- both indexes; with room left on each page it stays on the same one (a
-- HOT update: no index entry). New pages only: nothing is rewritten, and
-- the lock (SHARE UPDATE EXCLUSIVE) does not block the pipeline's writes.
ALTER TABLE tx_attempt SET (fillfactor = 50);
