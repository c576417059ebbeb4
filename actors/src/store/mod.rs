//! PostgreSQL access for the engine.
//!
//! PostgreSQL is the authority. Reads go straight to the pool; every critical
//! write goes through a [`FencedTx`], which proves on the database that the
//! writer still holds the submitter's lease and fencing token. The functions
//! that write critical state take `&mut FencedTx`, so an unfenced critical
//! write does not compile.

pub mod actions;
pub mod audit;
pub mod completions;
mod error;
mod fenced;
pub mod filler;
pub mod group;
pub mod intents;
mod lease;
mod lease_batch;
mod lease_deadline;
pub mod node;
pub mod nonce_cursor;
mod owner;
pub mod pipeline;
pub mod resubmit;
pub mod tracking;
pub mod tx_query;

use sqlx::PgPool;

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

/// The embedded migrations (`migrations/` at the repository top).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Applies every pending migration. Idempotent: applied ones are skipped, and
/// concurrent callers serialise on sqlx's advisory lock. Runs on a
/// connection of its own with the pool's statement and lock timeouts lifted:
/// a migration on a large table may rightly take longer than any request.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    use sqlx::Connection;
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .options([("statement_timeout", "0"), ("lock_timeout", "0")]);
    let mut conn = sqlx::PgConnection::connect_with(&options).await?;
    let result = MIGRATOR.run_direct(&mut conn).await;
    let _closed = conn.close().await;
    result
}

/// Milliseconds of a duration as the `BIGINT` the SQL turns into an interval.
fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
