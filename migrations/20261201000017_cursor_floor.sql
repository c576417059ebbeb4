-- The nonce cursor is no longer written by every allocation (README "Data
-- model and leases", issue 28): that update was one row version per batch
-- of each submitter, one per intent when every batch holds one intent.
--
-- Every nonce handed out is written on its intent's row in the allocation's
-- transaction, so the cursor's next nonce is derived:
--
--     next = GREATEST(submitter_nonce_cursor.next_nonce,
--                     max(managed_tx.nonce of the submitter) + 1)
--
-- read under the cursor's row lock, which every allocation still takes.
-- `next_nonce` is now a floor: it is written when `released` or PROTECT
-- changes, when the chain's nonce is adopted, and — by the trigger below —
-- whenever a nonce leaves an intent's row (released, rejected, requeued
-- after an outsider consumed it, or the row deleted), so the derived next
-- nonce never goes back below a nonce that was handed out. A nonce given
-- back is listed in `released` as before.
CREATE FUNCTION managed_tx_keep_nonce_floor() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE submitter_nonce_cursor
       SET next_nonce = OLD.nonce + 1, updated_at = now()
     WHERE chain_id = OLD.chain_id AND submitter = OLD.submitter
       AND next_nonce <= OLD.nonce;
    RETURN NULL;
END;
$$;

-- `UPDATE OF nonce`: statements that do not name the column (the
-- acceptance, receipts) never run it; the allocation names it but its old
-- nonce is NULL.
CREATE TRIGGER managed_tx_nonce_left_row
    AFTER UPDATE OF nonce ON managed_tx
    FOR EACH ROW
    WHEN (OLD.nonce IS NOT NULL AND OLD.nonce IS DISTINCT FROM NEW.nonce)
    EXECUTE FUNCTION managed_tx_keep_nonce_floor();

CREATE TRIGGER managed_tx_nonce_row_deleted
    AFTER DELETE ON managed_tx
    FOR EACH ROW
    WHEN (OLD.nonce IS NOT NULL)
    EXECUTE FUNCTION managed_tx_keep_nonce_floor();

-- The derived next nonce of every cursor row is what its `next_nonce` says
-- today (allocations wrote it): no data to move.
