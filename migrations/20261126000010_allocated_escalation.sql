-- Intents no node has accepted yet escalate like accepted ones, and a nonce
-- whose bytes may sit in a pool is never released on a refusal alone
-- (DESIGN.md sections 7 and 10).

-- ALLOCATED: when the pipeline next retries the newest attempt's identical
-- bytes (short backoff). next_resubmit_at now means the same in every open
-- state: when the resubmit machinery next escalates (re-broadcast, bump,
-- STUCK).
ALTER TABLE managed_tx ADD COLUMN retry_at TIMESTAMPTZ;
-- When the intent got its nonce: stuck_after counts from here for an intent
-- no node has accepted.
ALTER TABLE managed_tx ADD COLUMN allocated_at TIMESTAMPTZ;
-- Some send of this intent got an unknown answer (timeout, connection,
-- 5xx): its bytes may be in a pool, so a later refusal does not release
-- its nonce.
ALTER TABLE managed_tx ADD COLUMN maybe_pooled BOOLEAN NOT NULL DEFAULT false;

UPDATE managed_tx SET retry_at = next_resubmit_at, allocated_at = updated_at
 WHERE state = 'ALLOCATED';

DROP INDEX managed_tx_resubmit_idx;
CREATE INDEX managed_tx_resubmit_idx ON managed_tx (chain_id, submitter, next_resubmit_at)
    WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND receipt IS NULL;
