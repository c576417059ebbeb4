-- Checks the existing rows against the widened set, without blocking writes.
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_sub_state_known;
