//! Operator actions on the engine (README "Operations"): restart,
//! unprotect, pausing and resuming sends, and live reconfiguration (new settings, new and removed
//! submitters).
//!
//! Actions that must not race the actor (restart, unprotect, removal)
//! pause it through the supervisor first: the actor drains and releases its
//! lease, the action runs, and the supervisor spawns a fresh actor.

use std::time::Duration;

use alloy::primitives::Address;

use super::Engine;
use crate::{
    domain::SubmitterKey,
    store::{
        self,
        audit::{AuditEntry, AuditOutcome},
        nonce_cursor, FencedTx, LeaseOutcome, LeaseRequest, StoreError,
    },
    submitter::{SubmitterContext, SubmitterSettings},
    supervisor::{EngineShared, SubmitterSpec, SupervisorMsg},
};

/// How long an operator action waits for the supervisor to pause an actor.
const PAUSE_CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a removed submitter is checked for open work before it stops.
const REMOVAL_POLL: Duration = Duration::from_secs(1);

/// Why an operator action failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The submitter is not configured on this node.
    #[error("submitter {0:#x} is not configured")]
    UnknownSubmitter(Address),
    /// Another node holds the submitter's lease; ask that node.
    #[error("node {owner} leads submitter {submitter:#x}; send the request to that node")]
    NotLeader {
        /// The submitter.
        submitter: Address,
        /// The node holding the lease.
        owner: String,
    },
    /// The supervisor did not answer in time.
    #[error("the supervisor did not answer: {0}")]
    Supervisor(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain node failed.
    #[error("chain: {0}")]
    Chain(#[from] crate::chain::ChainError),
}

/// What an unprotect did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unprotected {
    /// The PROTECT reason that was cleared (None: it was not protected).
    pub previous_reason: Option<String>,
    /// The cursor's next nonce after resyncing with the chain.
    pub next_nonce: u64,
    /// The fencing token the clearing write was made with.
    pub fencing_token: i64,
}

impl Engine {
    /// The submitter's context, or [`OpsError::UnknownSubmitter`].
    fn known_context(
        &self,
        address: Address,
    ) -> Result<std::sync::Arc<crate::submitter::SubmitterContext>, OpsError> {
        self.shared
            .context(&address)
            .ok_or(OpsError::UnknownSubmitter(address))
    }

    /// Pauses sending for the submitter on this chain, cluster-wide and
    /// durably (README "Guardrails"): the pause row and its audit row
    /// commit together; from then on no allocation draws a nonce for it,
    /// wherever its leader runs. Shown on this node at once, on the others
    /// at their next discovery. Returns the pause it replaced.
    pub async fn pause_sending(
        &self,
        address: Address,
        pause: store::pause::Pause,
        audit: &AuditEntry<'_>,
    ) -> Result<Option<store::pause::Pause>, OpsError> {
        let ctx = self.known_context(address)?;
        let before = store::pause::pause(&self.shared.pool, ctx.key, &pause, audit).await?;
        if let Some(handle) = self.shared.handle(address) {
            handle.status().set_pause(Some(std::sync::Arc::new(pause)));
        }
        tracing::warn!(target: "txmgr::ops", submitter = %ctx.key, actor = audit.actor, "submitter paused");
        Ok(before)
    }

    /// Lifts the pause (with its audit row, in one transaction) and wakes
    /// the leader, wherever it runs. Returns the pause lifted (`None`: it
    /// was not paused; nothing was written).
    pub async fn resume_sending(
        &self,
        address: Address,
        audit: &AuditEntry<'_>,
    ) -> Result<Option<store::pause::Pause>, OpsError> {
        let ctx = self.known_context(address)?;
        let lifted = store::pause::resume(&self.shared.pool, ctx.key, audit).await?;
        if let Some(handle) = self.shared.handle(address) {
            handle.status().set_pause(None);
        }
        if lifted.is_some() {
            tracing::warn!(target: "txmgr::ops", submitter = %ctx.key, actor = audit.actor, "submitter resumed");
            self.notify(address);
        }
        Ok(lifted)
    }

    async fn pause(&self, address: Address) -> Result<(), OpsError> {
        let millis = u64::try_from(PAUSE_CALL_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
        ractor::call_t!(
            self.supervisor(),
            |reply| SupervisorMsg::Pause(address, reply),
            millis
        )
        .map_err(|e| OpsError::Supervisor(e.to_string()))
    }

    fn resume(&self, address: Address) {
        let _ = self
            .supervisor()
            .send_message(SupervisorMsg::Resume(address));
    }

    /// Drains the submitter's actor (its in-flight work stays in the
    /// database) and spawns a fresh one, which re-acquires the lease. Also
    /// clears a `failed` role and the restart history.
    pub async fn restart(&self, address: Address) -> Result<(), OpsError> {
        self.known_context(address)?;
        self.pause(address).await?;
        self.resume(address);
        Ok(())
    }

    /// Clears PROTECT: re-syncs the nonce cursor with the chain's pending
    /// nonce and clears the reason in one fenced transaction, made by this
    /// node while it holds the lease (the local actor is paused meanwhile).
    /// Another node holding a live lease answers [`OpsError::NotLeader`].
    ///
    /// `audit` is written in that same transaction: PROTECT is cleared
    /// together with its audit row, or not at all.
    pub async fn unprotect(
        &self,
        address: Address,
        audit: &AuditEntry<'_>,
    ) -> Result<Unprotected, OpsError> {
        let ctx = self.known_context(address)?;
        let me = &self.shared.config.owner;
        if let Some(info) = store::current_lease(&self.shared.pool, ctx.key).await? {
            if !info.is_owned_by(me) && !info.expires_in.is_zero() {
                return Err(OpsError::NotLeader {
                    submitter: address,
                    owner: info.owner_node,
                });
            }
        }
        self.pause(address).await?;
        let result = clear_protect(&ctx, audit).await;
        if result.is_ok() {
            if let Some(handle) = self.shared.handle(address) {
                handle.status().set_protect_reason(None);
            }
        }
        self.resume(address);
        result
    }

    /// Pushes new settings into a running submitter: the actor reads them
    /// at its next step, so in-flight work is kept. The ingress queue's
    /// capacity and batch size are fixed when the handle is created.
    /// Returns false for an unknown submitter.
    pub fn apply_settings(&self, address: Address, settings: SubmitterSettings) -> bool {
        let Some(ctx) = self.shared.context(&address) else {
            return false;
        };
        if let Ok(mut slot) = ctx.settings.write() {
            *slot = settings;
        }
        if let Some(handle) = self.shared.handles.get(&address) {
            handle.wake();
        }
        true
    }

    /// Starts serving a submitter added to the configuration (or one whose
    /// removal is being undone: it accepts creates again with `spec`'s
    /// settings).
    pub fn add_submitter(&self, spec: SubmitterSpec) {
        let address = spec.address;
        if self.shared.context(&address).is_some() {
            self.apply_settings(address, spec.settings);
        } else if let Ok(mut contexts) = self.shared.contexts.write() {
            contexts.insert(address, self.shared.new_context(spec));
        }
        self.shared.removed.remove(&address);
        if let Some(handle) = self.shared.handle(address) {
            handle.set_draining(false);
        }
        self.resume(address);
    }

    /// A submitter removed from the configuration: new creates are refused
    /// (422) at once; its actor keeps working until no intent of it is
    /// open on this chain, then stops and releases its lease.
    pub fn remove_submitter(&self, address: Address) {
        let Some(handle) = self.shared.handle(address) else {
            return;
        };
        handle.set_draining(true);
        self.shared.removed.insert(address);
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                if !engine.shared.removed.contains(&address) {
                    return;
                }
                match open_work(&engine.shared, address).await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(err) => {
                        tracing::warn!(target: "txmgr::supervisor", %address, error = %err, "checking a removed submitter's open work failed")
                    }
                }
                tokio::time::sleep(REMOVAL_POLL).await;
            }
            if let Err(err) = engine.pause(address).await {
                tracing::warn!(target: "txmgr::supervisor", %address, error = %err, "stopping a removed submitter failed");
            } else {
                tracing::info!(target: "txmgr::supervisor", %address, "removed submitter drained and stopped");
            }
        });
    }
}

/// Open intents of a submitter (not terminal).
async fn open_work(shared: &EngineShared, address: Address) -> Result<i64, StoreError> {
    let key = SubmitterKey::new(shared.config.chain_id, address);
    store::intents::open_count(&shared.pool, key).await
}

/// Takes (or renews) the lease and clears PROTECT under it, the cursor
/// first moved up to the chain's pending nonce.
async fn clear_protect(
    ctx: &SubmitterContext,
    audit: &AuditEntry<'_>,
) -> Result<Unprotected, OpsError> {
    let request = LeaseRequest {
        submitter: ctx.key,
        owner: ctx.owner.clone(),
        duration: ctx.lease.duration,
        clock_skew: ctx.lease.clock_skew,
    };
    let lease = match store::acquire_or_renew(&ctx.pool, &request).await? {
        LeaseOutcome::NotLeader(info) => {
            return Err(OpsError::NotLeader {
                submitter: ctx.key.address,
                owner: info.owner_node,
            })
        }
        outcome => outcome
            .lease()
            .cloned()
            .ok_or_else(|| OpsError::Supervisor("lease outcome without a lease".into()))?,
    };
    let nonces = ctx.chain.nonces(ctx.key.address).await?;
    let mut ftx = FencedTx::begin(&ctx.pool, &lease, "unprotect").await?;
    let cursor = nonce_cursor::init(&mut ftx, nonces.pending).await?;
    let previous_reason = cursor.protect_reason.clone();
    nonce_cursor::adopt_chain_nonce(&mut ftx, nonces.pending).await?;
    nonce_cursor::clear_protect(&mut ftx, nonces.pending).await?;
    store::audit::insert(ftx.conn(), audit, AuditOutcome::Done).await?;
    ftx.commit().await?;
    tracing::info!(target: "txmgr::supervisor", submitter = %ctx.key, fencing_token = lease.token,
        chain_pending = nonces.pending, "PROTECT cleared");
    Ok(Unprotected {
        previous_reason,
        next_nonce: cursor.next_nonce.max(nonces.pending),
        fencing_token: lease.token,
    })
}
