-- Checks the rows written before managed_tx_sub_state_known existed (see the
-- previous migration). VALIDATE takes a lock that lets writes go on while
-- the table is scanned; it runs in a transaction of its own so the
-- previous migration's stronger lock is not held through the scan.
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_sub_state_known;
