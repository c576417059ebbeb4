-- An operator's unprotect covers every external use of the key known when
-- it ran: nonces below this were already used by someone else then, and
-- finding one of our intents lost among them is no new evidence for PROTECT
-- (DESIGN.md section 7).
ALTER TABLE submitter_nonce_cursor ADD COLUMN protect_covered_below BIGINT
    CHECK (protect_covered_below >= 0);
