//! Names of the metrics the engine records (prefix `txmgr_`, DESIGN.md section 14).
//!
//! The engine records through the `metrics` facade; the daemon installs the
//! Prometheus exporter. Label values are bounded (results, operations), never
//! per-transaction.

/// Counter: lease acquisition attempts, label `result` =
/// `acquired` | `renewed` | `taken_over` | `not_owner` | `released`.
pub const LEASE_ACQUISITIONS: &str = "txmgr_lease_acquisitions_total";

/// Counter: fenced transactions, labels `operation` and `result` = `ok` | `fenced` | `error`.
pub const FENCED_WRITES: &str = "txmgr_fenced_writes_total";

/// Counter: broadcast results by class, label `result` (see `BroadcastClass::label`).
pub const BROADCASTS: &str = "txmgr_broadcasts_total";

/// Counter: external use of a submitter's key detected, label `action` = `adopt` | `protect`.
pub const EXTERNAL_NONCE: &str = "txmgr_external_nonce_total";
