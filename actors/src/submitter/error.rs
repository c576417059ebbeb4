//! The leader pipeline's error: every step of a SubmitterActor's work returns
//! it, and the actor turns it into a reaction (retry, renew, or stop).

use crate::{chain::ChainError, signer::SignerError, store::StoreError};

/// Why a leader's step (work cycle, broadcast, resubmit, sweep, tracking
/// report, lease renewal) stopped early: the one error type of the leader's
/// pipeline.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaderError {
    /// Database failure, or `Fenced` (the lease is gone: stop).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain node could not be asked.
    #[error("chain: {0}")]
    Chain(#[from] ChainError),
    /// The signer could not sign.
    #[error("signer: {0}")]
    Signer(#[from] SignerError),
    /// The local lease deadline passed: renew before acting.
    #[error("lease deadline passed; renew first")]
    LeaseExpired,
    /// Renewing in line found the lease gone or its token changed: stop.
    #[error("lease lost while working")]
    LeaseLost,
}

impl LeaderError {
    /// The lease is lost: the actor must stop.
    pub(crate) fn is_fenced(&self) -> bool {
        matches!(self, LeaderError::LeaseLost)
            || matches!(self, LeaderError::Store(e) if e.is_fenced())
    }
}
