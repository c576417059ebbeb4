-- Since 20261201000015 the way out no longer updates an attempt's row
-- after a plain acceptance, so the room `fillfactor = 50` kept on every
-- page for that update (20261201000012) now only doubles the table. An
-- attempt's row is still updated for other answers (refusals, retries, the
-- resubmit and operator paths): rare, and such an update writes index
-- entries again when its page is full. New pages only: nothing is
-- rewritten, and the lock (SHARE UPDATE EXCLUSIVE) does not block writes.
ALTER TABLE tx_attempt RESET (fillfactor);
