-- Validates the constraints of migration 20261206000004 (see there): a scan
-- per table under SHARE UPDATE EXCLUSIVE, which lets reads and writes go on.

ALTER TABLE funds_top_up VALIDATE CONSTRAINT funds_top_up_funder_check;
ALTER TABLE funds_top_up VALIDATE CONSTRAINT funds_top_up_submitter_check;
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_mined_tx_hash_check;
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_receipt_block_hash_check;
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_sub_state_check;
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_submitter_check;
ALTER TABLE managed_tx VALIDATE CONSTRAINT managed_tx_tx_hash_check;
ALTER TABLE submitter_funds VALIDATE CONSTRAINT submitter_funds_submitter_check;
ALTER TABLE submitter_lease VALIDATE CONSTRAINT submitter_lease_submitter_check;
ALTER TABLE submitter_nonce_cursor VALIDATE CONSTRAINT submitter_nonce_cursor_submitter_check;
ALTER TABLE tx_attempt VALIDATE CONSTRAINT tx_attempt_tx_hash_check;
ALTER TABLE tx_completion VALIDATE CONSTRAINT tx_completion_submitter_check;
ALTER TABLE tx_completion VALIDATE CONSTRAINT tx_completion_tx_hash_check;
ALTER TABLE webhook_cursor VALIDATE CONSTRAINT webhook_cursor_webhook_check;
