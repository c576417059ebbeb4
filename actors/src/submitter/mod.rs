//! One SubmitterActor per submitter: the only writer of its critical state on
//! this node, and only while it holds the lease.
//!
//! ```text
//!  HTTP create ─► SubmitterHandle ─ingress queue─► writer (group commit QUEUED) ─wake─┐
//!                                                                                    ▼
//!  SubmitterActor: lease tick ─► acquire/renew ─► leader: cycle (prepare ─► allocate ─►
//!                  sign ─► persist attempts ─► broadcast ─► record) ; sweep (receipts, nonces)
//! ```

mod actor;
mod allocation;
mod broadcast;
mod cycle;
mod error;
mod escalation;
mod fees;
pub mod funds;
mod handle;
mod ingress;
mod keeper;
mod leader_lease;
mod presign;
mod resubmit_pass;
pub mod settings;
mod signing;
mod status;
mod sweep;
mod tracking_reports;
mod verdict;

use std::{
    sync::{Arc, RwLock},
    time::Duration,
};

use sqlx::PgPool;

use crate::{
    chain::ChainClient,
    cluster::Membership,
    domain::SubmitterKey,
    signer::TxSigner,
    store::{self, group::GroupCommitter, queue_read::QueueReader, LeaseOwner},
    tracker::{ReceiptIndex, ResubmitTimers},
};

pub(crate) use actor::IDLE_STOP;
pub use actor::{SubmitterActor, SubmitterArgs, SubmitterMsg};
pub use handle::{SubmitterHandle, BUSY_RETRY_AFTER, OVERLOADED_RETRY_AFTER};
pub use ingress::{queued_bytes, IngressLimits, IngressWriter, INGRESS_ITEM_OVERHEAD_BYTES};
pub use keeper::LeaseKeeper;
pub use settings::{GasBump, SubmitterSettings};
pub use status::{Role, SubmitterStatus};

pub use crate::domain::LeaseTiming;

/// Everything a SubmitterActor works with; shared with its handle and the
/// supervisor.
#[derive(Debug)]
pub struct SubmitterContext {
    /// The submitter.
    pub key: SubmitterKey,
    /// This process: its `node_id` and instance (the lease owner).
    pub owner: LeaseOwner,
    /// The database.
    pub pool: PgPool,
    /// The chain node.
    pub chain: Arc<dyn ChainClient>,
    /// The submitter's key.
    pub signer: Arc<dyn TxSigner>,
    /// Current settings; replaced on reload.
    pub settings: RwLock<SubmitterSettings>,
    /// Lease timing.
    pub lease: LeaseTiming,
    /// Period of the leader's slow sweep (external nonces, missed receipts).
    pub sweep_interval: Duration,
    /// Attempt hashes the block matcher looks for.
    pub index: Arc<ReceiptIndex>,
    /// The resubmit timers of this node.
    pub timers: Arc<ResubmitTimers>,
    /// Live nodes and preferred lease holders.
    pub membership: Arc<Membership>,
    /// The node-wide group committer of the hot-path fenced writes.
    pub committer: GroupCommitter,
    /// The node-wide reader of the leaders' next QUEUED intents.
    pub queue: QueueReader,
    /// Renews every lease of this node in one statement.
    pub keeper: Arc<LeaseKeeper>,
    /// Intents the last sweep saw with their nonce consumed and no receipt
    /// of theirs: acted on only if the next sweep sees the same.
    pub consumed_suspects: std::sync::Mutex<std::collections::HashSet<uuid::Uuid>>,
}

impl SubmitterContext {
    /// Whether the current policy lets `intent` be created.
    pub fn check_policy(
        &self,
        intent: &crate::domain::Intent,
    ) -> Result<(), settings::PolicyViolation> {
        match self.settings.read() {
            Ok(settings) => settings.policy.check(intent),
            // A writer panicked mid-reload: the policy cannot be read, so
            // nothing passes it.
            Err(_) => Err(settings::PolicyViolation {
                rule: "policy",
                field: "submitter",
                detail: "the submitter's policy cannot be read".into(),
            }),
        }
    }

    /// Why a create is refused while the submitter is paused (`pause`: the
    /// operator's, as this node knows it), or `None` when creates are
    /// accepted (not paused, or `pause_accepts_creates`).
    pub fn pause_refusal(&self, pause: Option<&store::pause::Pause>) -> Option<String> {
        let settings = self.settings.read().ok()?;
        if settings.pause_accepts_creates {
            return None;
        }
        match pause {
            Some(pause) => Some(pause.reason.clone()),
            None => settings
                .paused
                .then(|| "paused = true in the configuration".to_owned()),
        }
    }

    /// Paused by the configuration (`paused = true`): no allocation.
    pub fn paused_by_config(&self) -> bool {
        self.settings.read().is_ok_and(|s| s.paused)
    }

    /// A snapshot of the current settings.
    pub fn settings(&self) -> SubmitterSettings {
        self.settings.read().map(|s| s.clone()).unwrap_or_default()
    }
}
