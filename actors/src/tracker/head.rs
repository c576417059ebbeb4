//! The HeadWatcher: follows the head by polling, fetches each new block once,
//! keeps the canonical window, detects reorgs by parent-hash mismatch, finds
//! the fork point, and catches up over gaps without skipping blocks.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::{sync::watch, task::JoinHandle};

use super::{CanonicalWindow, FinalityMsg, ReceiptMsg, WorkerSlots};
use crate::{
    chain::{BlockSummary, ChainClient, ChainError, WsTarget},
    metrics::REORGS,
};

/// Blocks fetched per tick at most, so a long catch-up stays responsive.
const MAX_BLOCKS_PER_TICK: u64 = 256;

/// Messages of the head watcher.
#[derive(Debug)]
pub enum HeadMsg {
    /// Timer: look for new blocks.
    Tick,
}

/// Follows the chain head (polling, woken early by `newHeads`), keeps the
/// canonical window, and hands each new block to the pools.
#[derive(Debug, Default)]
pub struct HeadWatcher;

/// What it starts with.
#[derive(Debug)]
pub struct HeadWatcherArgs {
    /// The chain.
    pub chain: Arc<dyn ChainClient>,
    /// Its `chain` metric label.
    pub chain_label: String,
    /// The window it keeps (shared with finality workers).
    pub window: Arc<CanonicalWindow>,
    /// Receipt workers (looked up per send: a restarted one replaces its
    /// slot); block n goes to slot n mod len.
    pub receipt_workers: Arc<WorkerSlots<ReceiptMsg>>,
    /// Finality workers (looked up per send); every head and reorg goes to each.
    pub finality_workers: Arc<WorkerSlots<FinalityMsg>>,
    /// Poll period.
    pub poll_interval: Duration,
    /// Where progress is published.
    pub progress: Arc<super::TrackerProgress>,
    /// The WebSocket endpoint of the endpoint chosen for reads (followed as
    /// reads move): `newHeads` notifications wake the watcher at once and
    /// polling slows to a fallback while the subscription is up.
    pub ws: Option<watch::Receiver<Option<WsTarget>>>,
}

/// Where the watcher is between messages: the next height to fetch, the
/// armed poll timer and the `newHeads` subscription that wakes it early.
#[derive(Debug)]
pub struct HeadState {
    args: HeadWatcherArgs,
    /// The next height to fetch (None until the first head is seen).
    next: Option<u64>,
    /// The pending poll timer (re-armed, never duplicated).
    timer: Option<JoinHandle<Result<(), ractor::MessagingErr<HeadMsg>>>>,
    /// The WebSocket subscription task, when endpoints have `ws_url`s.
    subscription: Option<JoinHandle<()>>,
    /// True while the subscription delivers heads.
    ws_up: Arc<AtomicBool>,
    /// A subscription wake-up waits in the mailbox (at most one does).
    ws_tick: Arc<super::Coalesced>,
}

/// While `newHeads` arrive over WebSocket, polling only guards against a
/// silently dead subscription.
const WS_POLL_FACTOR: u32 = 10;

impl Actor for HeadWatcher {
    type Msg = HeadMsg;
    type State = HeadState;
    type Arguments = HeadWatcherArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<HeadMsg>,
        args: HeadWatcherArgs,
    ) -> Result<HeadState, ActorProcessingErr> {
        myself.send_message(HeadMsg::Tick)?;
        let ws_up = Arc::new(AtomicBool::new(false));
        let ws_tick = Arc::new(super::Coalesced::default());
        let subscription = args.ws.clone().map(|targets| {
            tokio::spawn(super::new_heads::follow_new_heads(
                targets,
                super::new_heads::HeadWaker {
                    watcher: myself.clone(),
                    queued: ws_tick.clone(),
                },
                ws_up.clone(),
            ))
        });
        // A restarted watcher goes on after the last block it accepted (the
        // window outlives it); a first start begins at the chain's head.
        let next = args.window.tip().map(|(number, _)| number + 1);
        Ok(HeadState {
            args,
            next,
            timer: None,
            subscription,
            ws_up,
            ws_tick,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<HeadMsg>,
        state: &mut HeadState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(task) = state.subscription.take() {
            task.abort();
        }
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<HeadMsg>,
        _msg: HeadMsg,
        state: &mut HeadState,
    ) -> Result<(), ActorProcessingErr> {
        // Any tick follows the chain up to its head: a wake-up that arrives
        // from now on is for a newer head, and may be queued again.
        state.ws_tick.taken();
        let idle = if state.ws_up.load(Ordering::Relaxed) {
            state.args.poll_interval * WS_POLL_FACTOR
        } else {
            state.args.poll_interval
        };
        let delay = match follow(state).await {
            Ok(true) => Duration::ZERO,
            Ok(false) => idle,
            Err(err) => {
                tracing::warn!(target: "txmgr::head", error = %err, "following the head failed; retrying");
                state.args.poll_interval
            }
        };
        if let Some(old) = state
            .timer
            .replace(myself.send_after(delay, || HeadMsg::Tick))
        {
            old.abort();
        }
        Ok(())
    }
}

/// Processes new blocks; true when still behind the head.
async fn follow(state: &mut HeadState) -> Result<bool, ChainError> {
    let args = &state.args;
    let head = args.chain.block_number().await?;
    // Start at the current head: earlier receipts are found by the leaders'
    // sweep on acquisition, not by replaying history.
    let mut next = state.next.unwrap_or(head);
    // Caught up: a reorg that keeps the height (e.g. anvil_reorg) shows only
    // as a changed hash at the tip.
    if next == head + 1 {
        if let (Some(seen), Some(block)) =
            (args.window.hash_at(head), args.chain.block(head).await?)
        {
            if seen != block.hash {
                next = reorg(args).await? + 1;
            }
        }
    }
    let stop = head.min(next.saturating_add(MAX_BLOCKS_PER_TICK - 1));
    let mut processed = None;
    // A failed call keeps the blocks accepted so far: a flaky RPC slows the
    // watcher down but never makes it start a catch-up over again.
    let mut failure = None;
    while next <= stop {
        let block = match args.chain.block(next).await {
            Ok(Some(block)) => block,
            Ok(None) => break,
            Err(err) => {
                failure = Some(err);
                break;
            }
        };
        if let Some((tip, tip_hash)) = args.window.tip() {
            if tip + 1 == block.number && tip_hash != block.parent_hash {
                match reorg(args).await {
                    Ok(fork) => next = fork + 1,
                    Err(err) => {
                        failure = Some(err);
                        break;
                    }
                }
                continue;
            }
        }
        accept(args, block);
        processed = Some(next);
        next += 1;
    }
    state.next = Some(next);
    if let Some(number) = processed {
        args.progress.set_head(number);
    }
    if let Some(err) = failure {
        return Err(err);
    }
    // Every tick, new block or not: a receipt recorded after its block's
    // head was processed must not wait for the next block to become final.
    // Coalesced: a worker still busy with the last head gets the newest one
    // when it is done, not one message per tick.
    if let Some((number, _)) = args.window.tip() {
        for slot in 0..args.finality_workers.len() {
            let worker = args.finality_workers.get(slot);
            args.progress.offer_head(slot, number, || {
                worker.is_some_and(|w| w.send_message(FinalityMsg::Head).is_ok())
            });
        }
    }
    Ok(next <= head)
}

/// Handles a detected reorg: finds the fork point, forgets the orphaned
/// blocks and tells the finality workers. Returns the fork point.
async fn reorg(args: &HeadWatcherArgs) -> Result<u64, ChainError> {
    let fork = find_fork(args).await?;
    args.window.truncate_above(fork);
    metrics::counter!(REORGS, "chain" => args.chain_label.clone()).increment(1);
    tracing::warn!(target: "txmgr::head", fork, "reorg detected; blocks above the fork are orphaned");
    for slot in 0..args.finality_workers.len() {
        let worker = args.finality_workers.get(slot);
        args.progress
            .finality_gauge(slot)
            .send(|| worker.is_some_and(|w| w.send_message(FinalityMsg::Reorg { fork }).is_ok()));
    }
    Ok(fork)
}

fn accept(args: &HeadWatcherArgs, block: BlockSummary) {
    args.window.push(block.number, block.hash);
    if !block.tx_hashes.is_empty() {
        let slot = (block.number % args.receipt_workers.len() as u64) as usize;
        let worker = args.receipt_workers.get(slot);
        args.progress
            .receipt_gauge(slot)
            .send(|| worker.is_some_and(|w| w.send_message(ReceiptMsg::Block(block)).is_ok()));
    }
}

/// Walks the window back until its hash agrees with the chain: that height
/// is the fork point. A reorg deeper than the window forks below it.
async fn find_fork(args: &HeadWatcherArgs) -> Result<u64, ChainError> {
    for (number, hash) in args.window.heights_newest_first() {
        if let Some(canonical) = args.chain.block(number).await? {
            if canonical.hash == hash {
                return Ok(number);
            }
        }
    }
    let below = args.window.oldest().map_or(0, |n| n.saturating_sub(1));
    args.window.clear();
    tracing::error!(target: "txmgr::head", fork = below, "reorg deeper than the canonical window");
    Ok(below)
}
