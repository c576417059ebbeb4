//! Following the chain for every leader on this node (README "Receipts,
//! finality and reorgs").
//!
//! ```text
//! HeadWatcher ──block──► ReceiptWorker pool ──Receipts──► SubmitterActor (fenced write)
//!     │  (window of canonical hashes, reorg detection)
//!     └──head / reorg──► FinalityWorker pool ──Finalize / ReorgedOut──► SubmitterActor
//! ResubmitWorker pool (a timer per accepted, unmined intent) ──ResubmitDue──► SubmitterActor
//! ```
//!
//! Messages that repeat every tick (heads to the finality workers, `newHeads`
//! wake-ups, finality reports to a SubmitterActor) are coalesced: at most one
//! of a kind waits per receiver ([`Coalesced`]).
//!
//! Cost per new block: one `eth_getBlockByNumber`, plus one
//! `eth_getBlockReceipts` only when the block holds one of our attempts —
//! independent of how many intents are tracked. Pools never write: they
//! message the owning SubmitterActor, which writes under its fence.

mod coalesce;
mod finality;
mod head;
mod index;
mod new_heads;
mod receipts;
mod report;
mod resubmit_timers;
mod slots;
mod window;

use std::fmt;

use alloy::primitives::Address;

use crate::domain::Finality;

pub use coalesce::Coalesced;
pub use finality::{FinalityMsg, FinalityWorker, FinalityWorkerArgs};
pub use head::{HeadMsg, HeadWatcher, HeadWatcherArgs};
pub use index::{ReceiptIndex, Tracked};
pub use receipts::{ReceiptMsg, ReceiptWorker, ReceiptWorkerArgs};
pub use report::TrackerReport;
pub use resubmit_timers::{ResubmitMsg, ResubmitPoolStats, ResubmitTimers, ResubmitWorker};
pub use slots::WorkerSlots;
pub use window::CanonicalWindow;

/// Messages waiting in one worker's mailbox, with the time each was sent
/// (mailboxes are FIFO, so the front is the oldest).
#[derive(Debug, Default)]
pub struct QueueGauge {
    sent: std::sync::Mutex<std::collections::VecDeque<std::time::Instant>>,
}

impl QueueGauge {
    /// Counts a message in before `send` delivers it (so the worker can
    /// never take it before it is counted), and out again if `send` fails;
    /// returns what `send` did.
    pub(crate) fn send(&self, send: impl FnOnce() -> bool) -> bool {
        if let Ok(mut sent) = self.sent.lock() {
            sent.push_back(std::time::Instant::now());
        }
        let delivered = send();
        if !delivered {
            if let Ok(mut sent) = self.sent.lock() {
                sent.pop_back();
            }
        }
        delivered
    }

    /// The worker's mailbox was lost with it (restart): nothing waits.
    pub(crate) fn clear(&self) {
        if let Ok(mut sent) = self.sent.lock() {
            sent.clear();
        }
    }

    /// The worker took a message.
    pub(crate) fn taken(&self) {
        if let Ok(mut sent) = self.sent.lock() {
            sent.pop_front();
        }
    }

    /// Messages waiting, and how long the oldest has waited.
    pub fn snapshot(&self) -> (usize, std::time::Duration) {
        self.sent.lock().map_or((0, Default::default()), |sent| {
            (
                sent.len(),
                sent.front().map(|t| t.elapsed()).unwrap_or_default(),
            )
        })
    }
}

/// Queue figures of a pool: messages waiting over all workers and the
/// longest wait of any of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolQueue {
    /// Messages waiting.
    pub depth: usize,
    /// How long the oldest waiting message has waited.
    pub oldest_age: std::time::Duration,
}

fn pool_queue(gauges: &[QueueGauge]) -> PoolQueue {
    gauges
        .iter()
        .map(QueueGauge::snapshot)
        .fold(PoolQueue::default(), |acc, (depth, age)| PoolQueue {
            depth: acc.depth + depth,
            oldest_age: acc.oldest_age.max(age),
        })
}

/// How far the tracking actors have got: for the ops view and for tests that
/// must know a head was fully processed before they look.
#[derive(Debug)]
pub struct TrackerProgress {
    head: std::sync::atomic::AtomicU64,
    finality: Vec<std::sync::atomic::AtomicU64>,
    /// Per finality worker: the newest head offered to it, and whether a
    /// `Head` message to it waits (one at most).
    finality_offers: Vec<(std::sync::atomic::AtomicU64, Coalesced)>,
    receipt_queues: Vec<QueueGauge>,
    finality_queues: Vec<QueueGauge>,
    /// Counts nothing anyone reads: the target of an out-of-range slot.
    detached: QueueGauge,
}

impl TrackerProgress {
    /// Progress for `receipt_workers` and `finality_workers` workers.
    pub fn new(receipt_workers: usize, finality_workers: usize) -> Self {
        Self {
            head: Default::default(),
            finality: (0..finality_workers.max(1))
                .map(|_| Default::default())
                .collect(),
            finality_offers: (0..finality_workers.max(1))
                .map(|_| Default::default())
                .collect(),
            receipt_queues: (0..receipt_workers.max(1))
                .map(|_| Default::default())
                .collect(),
            finality_queues: (0..finality_workers.max(1))
                .map(|_| Default::default())
                .collect(),
            detached: QueueGauge::default(),
        }
    }

    /// Receipt matcher workers configured.
    pub fn receipt_workers(&self) -> usize {
        self.receipt_queues.len()
    }

    /// Finality workers configured.
    pub fn finality_workers(&self) -> usize {
        self.finality_queues.len()
    }

    /// The receipt matcher pool's queue.
    pub fn receipt_queue(&self) -> PoolQueue {
        pool_queue(&self.receipt_queues)
    }

    /// The finality pool's queue.
    pub fn finality_queue(&self) -> PoolQueue {
        pool_queue(&self.finality_queues)
    }

    /// The queue gauge of receipt worker `slot` (a detached one if out of range).
    pub(crate) fn receipt_gauge(&self, slot: usize) -> &QueueGauge {
        self.receipt_queues.get(slot).unwrap_or(&self.detached)
    }

    /// The queue gauge of finality worker `slot` (a detached one if out of range).
    pub(crate) fn finality_gauge(&self, slot: usize) -> &QueueGauge {
        self.finality_queues.get(slot).unwrap_or(&self.detached)
    }

    /// Offers head `number` to finality worker `slot`: it becomes the head
    /// that worker processes next, and `send` delivers a `Head` message
    /// unless one is still waiting (coalesced: a slow worker finds one
    /// message, not one per tick).
    pub(crate) fn offer_head(&self, slot: usize, number: u64, send: impl FnOnce() -> bool) {
        let Some((latest, queued)) = self.finality_offers.get(slot) else {
            return;
        };
        latest.store(number, std::sync::atomic::Ordering::SeqCst);
        let gauge = self.finality_gauge(slot);
        queued.offer(|| gauge.send(send));
    }

    /// Finality worker `slot` took its `Head` message: the head to process.
    pub(crate) fn take_head(&self, slot: usize) -> u64 {
        self.finality_gauge(slot).taken();
        self.finality_offers
            .get(slot)
            .map_or(0, |(latest, queued)| {
                queued.taken();
                latest.load(std::sync::atomic::Ordering::SeqCst)
            })
    }

    /// Receipt worker `slot` was restarted: what waited in the dead
    /// actor's mailbox is gone (the leaders' sweep finds those receipts).
    pub(crate) fn reset_receipt_slot(&self, slot: usize) {
        if let Some(gauge) = self.receipt_queues.get(slot) {
            gauge.clear();
        }
    }

    /// Finality worker `slot` was restarted: its waiting messages are gone,
    /// so the next head must be sent, not coalesced into a lost one.
    pub(crate) fn reset_finality_slot(&self, slot: usize) {
        if let Some(gauge) = self.finality_queues.get(slot) {
            gauge.clear();
        }
        if let Some((_, queued)) = self.finality_offers.get(slot) {
            queued.taken();
        }
    }

    /// The newest block the head watcher has processed.
    pub fn head(&self) -> u64 {
        self.head.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The newest head every finality worker has fully processed.
    pub fn finality_head(&self) -> u64 {
        self.finality
            .iter()
            .map(|h| h.load(std::sync::atomic::Ordering::Acquire))
            .min()
            .unwrap_or(0)
    }

    pub(crate) fn set_head(&self, number: u64) {
        self.head
            .store(number, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn set_finality(&self, slot: usize, number: u64) {
        if let Some(h) = self.finality.get(slot) {
            h.store(number, std::sync::atomic::Ordering::Release);
        }
    }
}

/// How the tracking pools reach the SubmitterActors of this node.
pub trait SubmitterRouter: Send + Sync + fmt::Debug {
    /// Delivers a report to the submitter's actor here; false if none runs.
    fn deliver(&self, submitter: Address, report: TrackerReport) -> bool;
    /// Delivers a report the sender repeats on every head while it holds
    /// (`Finalize`, a receipt seen orphaned): dropped while one of its kind
    /// still waits in that actor's mailbox. False if no actor runs.
    fn deliver_repeating(&self, submitter: Address, report: TrackerReport) -> bool;
    /// The submitters this node leads now, with their finality setting.
    fn led(&self) -> Vec<(Address, Finality)>;
}
