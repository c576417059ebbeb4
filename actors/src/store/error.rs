//! The store's error type.

use crate::domain::SubmitterKey;

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// What can go wrong talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The lease row no longer names this node with this token, or it expired:
    /// another node may own the submitter. Nothing was written; the caller must
    /// stop working on the submitter.
    #[error("fenced: {submitter} is no longer leased to this node with token {token}")]
    Fenced {
        /// The submitter whose lease was lost.
        submitter: SubmitterKey,
        /// The token the writer held.
        token: i64,
    },
    /// A row the operation needs does not exist (e.g. no nonce cursor yet).
    #[error("missing {what} for {submitter}")]
    Missing {
        /// What was looked for.
        what: &'static str,
        /// Whose it is.
        submitter: SubmitterKey,
    },
    /// The database holds something the engine cannot interpret.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// The database or the connection failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl StoreError {
    /// True when the caller lost its lease and must stop writing.
    pub fn is_fenced(&self) -> bool {
        matches!(self, StoreError::Fenced { .. })
    }
}
