//! A FinalityWorker: on each new head, decides which mined intents of the
//! submitters it serves are final — by depth or by the `safe`/`finalized`
//! block — after checking that their block is still canonical; on a reorg,
//! reports the receipts in orphaned blocks.

use std::{collections::HashMap, sync::Arc};

use alloy::primitives::{Address, B256};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use sqlx::PgPool;
use uuid::Uuid;

use super::{CanonicalWindow, SubmitterRouter};
use crate::{
    chain::{ChainClient, ChainError, FinalityTag},
    metrics::REORGS_BEYOND_FINALITY,
    store::StoreError,
    submitter::{Finality, SubmitterMsg},
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

/// The actor.
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
    pub chain_id: u64,
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
    Db(#[from] sqlx::Error),
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

type MinedRow = (Uuid, String, i64, String, Option<String>);

async fn mined_intents(
    state: &FinalityWorkerArgs,
    submitters: &[String],
    above: i64,
) -> Result<Vec<MinedRow>, FinalityError> {
    Ok(sqlx::query_as(
        "SELECT tx_id, submitter, receipt_block_number, receipt_block_hash, receipt->>'status'
           FROM managed_tx
          WHERE chain_id = $1 AND submitter = ANY($2) AND state IN ('TRACKING', 'STUCK')
            AND receipt IS NOT NULL AND receipt_block_number > $3",
    )
    .bind(i64::try_from(state.chain_id).unwrap_or(i64::MAX))
    .bind(submitters)
    .bind(above)
    .fetch_all(&state.pool)
    .await?)
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
    let submitters: Vec<String> = led.keys().map(|a| format!("{a:#x}")).collect();
    let rows = mined_intents(state, &submitters, -1).await?;
    let mut tags: HashMap<FinalityTag, Option<u64>> = HashMap::new();
    let mut finalize: HashMap<Address, Vec<(Uuid, bool)>> = HashMap::new();
    let mut orphaned: HashMap<Address, Vec<(Uuid, B256)>> = HashMap::new();
    for (tx_id, submitter, block, block_hash, status) in rows {
        let (Ok(address), Ok(hash)) = (submitter.parse::<Address>(), block_hash.parse::<B256>())
        else {
            continue;
        };
        let Some(finality) = led.get(&address) else {
            continue;
        };
        let block = u64::try_from(block).unwrap_or(0);
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
            orphaned.entry(address).or_default().push((tx_id, hash));
        } else if deep_enough {
            finalize
                .entry(address)
                .or_default()
                .push((tx_id, succeeded(status.as_deref())));
        }
    }
    // Both repeat on every head until the actor has acted: coalesced.
    for (address, decided) in finalize {
        state
            .router
            .deliver_repeating(address, SubmitterMsg::Finalize(decided));
    }
    for (address, lost) in orphaned {
        state
            .router
            .deliver_repeating(address, SubmitterMsg::ReorgedOut(lost));
    }
    Ok(())
}

async fn on_reorg(state: &FinalityWorkerArgs, fork: u64) -> Result<(), FinalityError> {
    let fork_db = i64::try_from(fork).unwrap_or(i64::MAX);
    if state.slot == 0 {
        // Final states are never rewritten, but a reorg under them is loud.
        let broken: Vec<(Uuid, i64)> = sqlx::query_as(
            "SELECT tx_id, receipt_block_number FROM managed_tx
              WHERE chain_id = $1 AND state IN ('CONFIRMED', 'FAILED_FINAL') AND receipt_block_number > $2",
        )
        .bind(i64::try_from(state.chain_id).unwrap_or(i64::MAX))
        .bind(fork_db)
        .fetch_all(&state.pool)
        .await?;
        for (tx_id, block) in broken {
            metrics::counter!(REORGS_BEYOND_FINALITY).increment(1);
            tracing::error!(target: "txmgr::finality", %tx_id, block, fork,
                "reorg deeper than finality: a CONFIRMED intent's block was replaced; state left as is");
        }
    }
    let led = mine(state);
    if led.is_empty() {
        return Ok(());
    }
    let submitters: Vec<String> = led.keys().map(|a| format!("{a:#x}")).collect();
    let mut orphaned: HashMap<Address, Vec<(Uuid, B256)>> = HashMap::new();
    for (tx_id, submitter, _, block_hash, _) in mined_intents(state, &submitters, fork_db).await? {
        if let (Ok(address), Ok(hash)) = (submitter.parse::<Address>(), block_hash.parse::<B256>())
        {
            orphaned.entry(address).or_default().push((tx_id, hash));
        }
    }
    for (address, lost) in orphaned {
        state
            .router
            .deliver(address, SubmitterMsg::ReorgedOut(lost));
    }
    Ok(())
}
