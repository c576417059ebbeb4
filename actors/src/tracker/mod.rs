//! Following the chain for every leader on this node (DESIGN.md section 9).
//!
//! ```text
//! HeadWatcher ──block──► ReceiptWorker pool ──Receipts──► SubmitterActor (fenced write)
//!     │  (window of canonical hashes, reorg detection)
//!     └──head / reorg──► FinalityWorker pool ──Finalize / ReorgedOut──► SubmitterActor
//! ResubmitWorker pool (a timer per accepted, unmined intent) ──ResubmitDue──► SubmitterActor
//! ```
//!
//! Cost per new block: one `eth_getBlockByNumber`, plus one
//! `eth_getBlockReceipts` only when the block holds one of our attempts —
//! independent of how many intents are tracked. Pools never write: they
//! message the owning SubmitterActor, which writes under its fence.

mod finality;
mod head;
mod index;
mod receipts;
mod resubmit;
mod window;

use std::fmt;

use alloy::primitives::Address;

use crate::submitter::{Finality, SubmitterMsg};

pub use finality::{FinalityMsg, FinalityWorker, FinalityWorkerArgs};
pub use head::{HeadMsg, HeadWatcher, HeadWatcherArgs};
pub use index::{ReceiptIndex, Tracked};
pub use receipts::{ReceiptMsg, ReceiptWorker, ReceiptWorkerArgs};
pub use resubmit::{ResubmitMsg, ResubmitPoolStats, ResubmitTimers, ResubmitWorker};
pub use window::CanonicalWindow;

/// How far the tracking actors have got: for the ops view and for tests that
/// must know a head was fully processed before they look.
#[derive(Debug)]
pub struct TrackerProgress {
    head: std::sync::atomic::AtomicU64,
    finality: Vec<std::sync::atomic::AtomicU64>,
}

impl TrackerProgress {
    /// Progress for `finality_workers` workers.
    pub fn new(finality_workers: usize) -> Self {
        Self {
            head: Default::default(),
            finality: (0..finality_workers.max(1))
                .map(|_| Default::default())
                .collect(),
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
    /// Delivers a message to the submitter's actor here; false if none runs.
    fn deliver(&self, submitter: Address, msg: SubmitterMsg) -> bool;
    /// The submitters this node leads now, with their finality setting.
    fn led(&self) -> Vec<(Address, Finality)>;
}
