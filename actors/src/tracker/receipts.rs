//! A ReceiptWorker: matches a block's transaction hashes against the index
//! of tracked attempts and fetches receipts only for matches, then hands them
//! to the owning SubmitterActor.

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::{primitives::Address, rpc::types::TransactionReceipt};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::{ReceiptIndex, SubmitterRouter, TrackerReport};
use crate::{
    chain::{BlockSummary, ChainClient, ChainError},
    metrics::RECEIPT_CHECKS,
    store::tracking::MinedReceipt,
};

/// Tries for one block before leaving it to the slow sweep.
const MAX_TRIES: u32 = 5;

/// Messages of a receipt worker.
#[derive(Debug)]
pub enum ReceiptMsg {
    /// A new canonical block.
    Block(BlockSummary),
    /// A retry of a block whose receipts could not be fetched.
    Retry(BlockSummary, u32),
}

/// Matches one new block's transactions against the receipt index and
/// fetches the block's receipts only when one of ours is in it.
#[derive(Debug, Default)]
pub struct ReceiptWorker;

/// What it starts with (also its state).
#[derive(Debug, Clone)]
pub struct ReceiptWorkerArgs {
    /// The chain.
    pub chain: Arc<dyn ChainClient>,
    /// Its `chain` metric label.
    pub chain_label: String,
    /// Tracked attempt hashes.
    pub index: Arc<ReceiptIndex>,
    /// Where receipts go.
    pub router: Arc<dyn SubmitterRouter>,
    /// Wait before retrying a failed block.
    pub retry_after: Duration,
    /// This worker's index in the pool (its queue gauge).
    pub slot: usize,
    /// Where the queue figures are published.
    pub progress: Arc<super::TrackerProgress>,
}

impl Actor for ReceiptWorker {
    type Msg = ReceiptMsg;
    type State = ReceiptWorkerArgs;
    type Arguments = ReceiptWorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ReceiptMsg>,
        args: ReceiptWorkerArgs,
    ) -> Result<ReceiptWorkerArgs, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<ReceiptMsg>,
        msg: ReceiptMsg,
        state: &mut ReceiptWorkerArgs,
    ) -> Result<(), ActorProcessingErr> {
        let (block, tries) = match msg {
            ReceiptMsg::Block(block) => {
                state.progress.receipt_gauge(state.slot).taken();
                (block, 1)
            }
            ReceiptMsg::Retry(block, tries) => (block, tries),
        };
        if let Err(err) = match_block(state, &block).await {
            if tries < MAX_TRIES {
                tracing::warn!(target: "txmgr::receipts", block = block.number, error = %err, "receipt fetch failed; retrying");
                myself.send_after(state.retry_after, move || {
                    ReceiptMsg::Retry(block, tries + 1)
                });
            } else {
                tracing::warn!(target: "txmgr::receipts", block = block.number, error = %err, "giving up on block; the slow sweep will find its receipts");
            }
        }
        Ok(())
    }
}

async fn match_block(state: &ReceiptWorkerArgs, block: &BlockSummary) -> Result<(), ChainError> {
    let matches: Vec<_> = block
        .tx_hashes
        .iter()
        .filter_map(|hash| state.index.lookup(hash).map(|tracked| (*hash, tracked)))
        .collect();
    if matches.is_empty() {
        return Ok(());
    }
    // One call for the whole block when the node supports it; per hash otherwise.
    let mut receipts: HashMap<_, TransactionReceipt> = HashMap::new();
    let whole_block = if matches.len() > 1 {
        metrics::counter!(RECEIPT_CHECKS, "chain" => state.chain_label.clone(), "method" => "block_receipts").increment(1);
        state.chain.block_receipts(block.hash).await?
    } else {
        None
    };
    match whole_block {
        Some(all) => receipts.extend(all.into_iter().map(|r| (r.transaction_hash, r))),
        None => {
            for (hash, _) in &matches {
                metrics::counter!(RECEIPT_CHECKS, "chain" => state.chain_label.clone(), "method" => "by_hash").increment(1);
                if let Some(receipt) = state.chain.receipt(*hash).await? {
                    receipts.insert(*hash, receipt);
                }
            }
        }
    }
    let mut by_submitter: HashMap<Address, Vec<(Uuid, MinedReceipt)>> = HashMap::new();
    for (hash, tracked) in matches {
        let Some(receipt) = receipts.remove(&hash) else {
            continue;
        };
        // A receipt from another block means the node moved on; the next
        // block (or the sweep) brings the right one.
        if receipt.block_hash != Some(block.hash) {
            continue;
        }
        let json = serde_json::to_value(&receipt).unwrap_or(serde_json::Value::Null);
        by_submitter.entry(tracked.submitter).or_default().push((
            tracked.tx_id,
            MinedReceipt {
                tx_hash: hash,
                block_number: block.number,
                block_hash: block.hash,
                receipt: json,
            },
        ));
    }
    for (submitter, found) in by_submitter {
        state
            .router
            .deliver(submitter, TrackerReport::Receipts(found));
    }
    Ok(())
}
