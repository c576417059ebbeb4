//! PostgreSQL access for the engine.
//!
//! PostgreSQL is the authority. Reads go straight to the pool; every critical
//! write goes through a [`FencedTx`], which proves on the database that the
//! writer still holds the submitter's lease and fencing token. The functions
//! that write critical state take `&mut FencedTx`, so an unfenced critical
//! write does not compile.
//!
//! Every SQL statement of the engine and the daemon is here, one module per
//! topic, and rows are read into named structs: elsewhere only the benchmark
//! binaries and the tests query the database (to measure and to verify).

pub mod actions;
pub mod audit;
pub mod completions;
mod error;
mod feed_cursor;
pub mod feed_retention;
mod fenced;
pub mod filler;
pub mod finality;
pub mod funds;
pub mod group;
pub mod history_retention;
pub mod intents;
mod lease;
mod lease_batch;
mod lease_deadline;
pub mod lease_scan;
pub mod node;
pub mod nonce_cursor;
pub mod open_work;
mod owner;
pub mod pause;
pub mod pipeline;
pub mod queue_read;
pub mod resubmit_claims;
mod resubmit_schedule;
mod schema;
pub mod spend;
pub mod spend_retention;
pub mod table_stats;
pub mod trace_context;
pub mod tracking;
pub mod tx_query;
pub mod webhook_lease;
pub mod webhooks;

pub use error::{StoreError, StoreResult};
pub use fenced::FencedTx;
pub use lease::{
    acquire_or_renew, acquire_or_renew_deferring, current_lease, hand_over, notify_handover,
    release, LeaseGuard, LeaseInfo, LeaseOutcome, LeaseRequest, LEASE_SUFFIX,
};
pub use lease_batch::{renew_all, HeldLease};
pub use lease_deadline::LeaseDeadline;
pub use nonce_cursor::NonceCursor;
pub use owner::LeaseOwner;
pub use schema::{
    applied_migrations, has_migrations_table, migrate, schema_state, unapplied_migrations,
    SchemaState, MIGRATOR,
};

/// Milliseconds of a duration as the `BIGINT` the SQL turns into an interval.
fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
