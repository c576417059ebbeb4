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
