//! A FinalityWorker: on each new head, decides which mined intents of the
//! submitters it serves are final — by depth or by the `safe`/`finalized`
//! block — after checking that their block is still canonical; on a reorg,
//! reports the receipts in orphaned blocks.

use std::{collections::HashMap, sync::Arc};

use alloy::primitives::Address;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use sqlx::PgPool;

use super::{CanonicalWindow, SubmitterRouter, TrackerReport};
use crate::{
    chain::{ChainClient, ChainError, FinalityTag},
    domain::{ChainId, FinalDecision, Finality, ReorgedReceipt},
    store::{finality, StoreError},
};

/// Messages of a finality worker.
#[derive(Debug)]
pub enum FinalityMsg {
    /// The head advanced (or another tick passed): process the newest head
    /// offered ([`super::TrackerProgress::offer_head`]; coalesced, so one
    /// message may stand for many ticks).
    Head,
    /// Blocks above `fork` were replaced.
    Reorg {
        /// Highest block still canonical.
        fork: u64,
    },
}

/// Decides finality (and notices reorged receipts) for the leaders of its
/// slot, once per head; stateless between messages apart from its args.
#[derive(Debug, Default)]
pub struct FinalityWorker;

/// What it starts with (also its state).
#[derive(Debug, Clone)]
pub struct FinalityWorkerArgs {
    /// The chain.
    pub chain: Arc<dyn ChainClient>,
    /// The database (reads only).
    pub pool: PgPool,
    /// The chain id served.
    pub chain_id: ChainId,
    /// Canonical hashes seen by the head watcher.
    pub window: Arc<CanonicalWindow>,
    /// Where decisions go.
    pub router: Arc<dyn SubmitterRouter>,
    /// This worker's share: submitters whose last address byte ≡ `slot` mod `slots`.
    pub slot: usize,
    /// Number of workers.
    pub slots: usize,
    /// Where progress is published.
    pub progress: Arc<super::TrackerProgress>,
}

#[derive(Debug, thiserror::Error)]
enum FinalityError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Chain(#[from] ChainError),
}

impl Actor for FinalityWorker {
    type Msg = FinalityMsg;
    type State = FinalityWorkerArgs;
    type Arguments = FinalityWorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<FinalityMsg>,
        args: FinalityWorkerArgs,
    ) -> Result<FinalityWorkerArgs, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<FinalityMsg>,
        msg: FinalityMsg,
        state: &mut FinalityWorkerArgs,
    ) -> Result<(), ActorProcessingErr> {
        let result = match msg {
            FinalityMsg::Head => {
                let number = state.progress.take_head(state.slot);
                let result = on_head(state, number).await;
                state.progress.set_finality(state.slot, number);
                result
            }
            FinalityMsg::Reorg { fork } => {
                state.progress.finality_gauge(state.slot).taken();
                on_reorg(state, fork).await
            }
        };
        if let Err(err) = result {
            // The next head retries everything: no state is lost by skipping one.
            tracing::warn!(target: "txmgr::finality", error = %err, "finality check failed");
        }
        Ok(())
    }
}

fn mine(state: &FinalityWorkerArgs) -> HashMap<Address, Finality> {
    state
        .router
        .led()
        .into_iter()
        .filter(|(address, _)| usize::from(address.0[19]) % state.slots.max(1) == state.slot)
        .collect()
}

/// Receipt status 1 = success (alloy writes "0x1"; be lenient).
fn succeeded(status: Option<&str>) -> bool {
    matches!(status, Some("0x1" | "1" | "true"))
}

async fn on_head(state: &FinalityWorkerArgs, head: u64) -> Result<(), FinalityError> {
    let led = mine(state);
    if led.is_empty() {
        return Ok(());
    }
    let submitters: Vec<Address> = led.keys().copied().collect();
    let rows = finality::mined_not_final(&state.pool, state.chain_id, &submitters, None).await?;
    let mut tags: HashMap<FinalityTag, Option<u64>> = HashMap::new();
    let mut finalize: HashMap<Address, Vec<FinalDecision>> = HashMap::new();
    let mut orphaned: HashMap<Address, Vec<ReorgedReceipt>> = HashMap::new();
    for mined in rows {
        let (address, hash, block) = (mined.submitter, mined.block_hash, mined.block_number);
        let Some(finality) = led.get(&address) else {
            continue;
        };
        let deep_enough = match finality {
            Finality::Confirmations(n) => head.saturating_add(1) >= block.saturating_add(*n),
            Finality::Tag(tag) => {
                if !tags.contains_key(tag) {
                    tags.insert(*tag, state.chain.tagged_block_number(*tag).await?);
                }
                tags.get(tag)
                    .copied()
                    .flatten()
                    .is_some_and(|final_block| block <= final_block)
            }
        };
        let canonical = match state.window.hash_at(block) {
            Some(seen) => seen == hash,
            // Older than the window: ask, but only when it matters.
            None if deep_enough => state
                .chain
                .block(block)
                .await?
                .is_some_and(|b| b.hash == hash),
            None => true,
        };
        if !canonical {
            orphaned.entry(address).or_default().push(ReorgedReceipt {
                tx_id: mined.tx_id,
                block_hash: hash,
            });
        } else if deep_enough {
            finalize.entry(address).or_default().push(FinalDecision {
                tx_id: mined.tx_id,
                succeeded: succeeded(mined.status.as_deref()),
            });
        }
    }
    // Both repeat on every head until the actor has acted: coalesced.
    for (address, decided) in finalize {
        state
            .router
            .deliver_repeating(address, TrackerReport::Finalize(decided));
    }
    for (address, lost) in orphaned {
        state
            .router
            .deliver_repeating(address, TrackerReport::ReorgedOut(lost));
    }
    Ok(())
}

async fn on_reorg(state: &FinalityWorkerArgs, fork: u64) -> Result<(), FinalityError> {
    let led = mine(state);
    if led.is_empty() {
        return Ok(());
    }
    let submitters: Vec<Address> = led.keys().copied().collect();
    let mut orphaned: HashMap<Address, Vec<ReorgedReceipt>> = HashMap::new();
    // Mined intents above the fork, final ones included: a reorg deeper than
    // finality re-opens them (the leader writes the correction, fenced).
    let not_final =
        finality::mined_not_final(&state.pool, state.chain_id, &submitters, Some(fork)).await?;
    let final_ones = finality::final_above(&state.pool, state.chain_id, &submitters, fork).await?;
    for mined in not_final.into_iter().chain(final_ones) {
        orphaned
            .entry(mined.submitter)
            .or_default()
            .push(ReorgedReceipt {
                tx_id: mined.tx_id,
                block_hash: mined.block_hash,
            });
    }
    for (address, lost) in orphaned {
        state
            .router
            .deliver(address, TrackerReport::ReorgedOut(lost));
    }
    Ok(())
}
