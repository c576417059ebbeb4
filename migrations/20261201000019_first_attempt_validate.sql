-- Validates the check the previous migration added NOT VALID (every row it
-- scans has no first attempt yet); a scan under a lock that lets reads and
-- writes go on.
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_first_attempt_whole;
