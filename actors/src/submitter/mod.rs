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
mod next_batch;
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
    /// The node-wide group committer of the hot-path fenced writes; write
    /// through [`SubmitterContext::write`] (crate-private so that no caller
    /// can bypass the write turn).
    pub(crate) committer: GroupCommitter,
    /// Held while one of this submitter's group-commit writes is under
    /// way: see [`SubmitterContext::write`].
    pub(crate) write_turn: tokio::sync::Mutex<()>,
    /// The node-wide reader of the leaders' next QUEUED intents.
    pub queue: QueueReader,
    /// Renews every lease of this node in one statement.
    pub keeper: Arc<LeaseKeeper>,
    /// Intents the last sweep saw with their nonce consumed and no receipt
    /// of theirs: acted on only if the next sweep sees the same.
    pub consumed_suspects: std::sync::Mutex<std::collections::HashSet<uuid::Uuid>>,
}

impl SubmitterContext {
    /// Writes `write` through the group committer, one write of this
    /// submitter at a time. A leader overlaps its sends with its next batch,
    /// so its broadcast record and its next allocation can be due together;
    /// in turn, they never sit in two of the committer's concurrent
    /// transactions (which lock rows of several submitters each, and could
    /// then wait on each other), and they commit in the order they were
    /// asked for.
    pub(crate) async fn write(
        &self,
        lease: &crate::store::LeaseGuard,
        write: crate::store::group::Write,
    ) -> crate::store::StoreResult<crate::store::group::Answer> {
        let _turn = self.write_turn.lock().await;
        self.committer.write(lease, write).await
    }

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
