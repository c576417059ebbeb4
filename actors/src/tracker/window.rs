//! The canonical chain as the head watcher last saw it: recent block hashes
//! by height, shared read-only with the finality workers so most canonical
//! checks cost no RPC.

use std::{collections::BTreeMap, sync::RwLock};

use alloy::primitives::B256;

/// Recent canonical `number → hash`, at most `capacity` blocks.
#[derive(Debug)]
pub struct CanonicalWindow {
    blocks: RwLock<BTreeMap<u64, B256>>,
    capacity: usize,
}

impl CanonicalWindow {
    /// An empty window keeping `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self {
            blocks: RwLock::new(BTreeMap::new()),
            capacity: capacity.max(2),
        }
    }

    /// The newest block, if any.
    pub fn tip(&self) -> Option<(u64, B256)> {
        self.blocks
            .read()
            .ok()
            .and_then(|b| b.last_key_value().map(|(n, h)| (*n, *h)))
    }

    /// The canonical hash at a height, if inside the window.
    pub fn hash_at(&self, number: u64) -> Option<B256> {
        self.blocks
            .read()
            .ok()
            .and_then(|b| b.get(&number).copied())
    }

    /// The oldest height kept.
    pub fn oldest(&self) -> Option<u64> {
        self.blocks
            .read()
            .ok()
            .and_then(|b| b.first_key_value().map(|(n, _)| *n))
    }

    /// Appends a block on top (and forgets the oldest beyond capacity).
    pub fn push(&self, number: u64, hash: B256) {
        if let Ok(mut blocks) = self.blocks.write() {
            blocks.insert(number, hash);
            while blocks.len() > self.capacity {
                blocks.pop_first();
            }
        }
    }

    /// Forgets every block above `fork` (they were reorged out).
    pub fn truncate_above(&self, fork: u64) {
        if let Ok(mut blocks) = self.blocks.write() {
            blocks.retain(|n, _| *n <= fork);
        }
    }

    /// Forgets everything (a reorg deeper than the window).
    pub fn clear(&self) {
        if let Ok(mut blocks) = self.blocks.write() {
            blocks.clear();
        }
    }

    /// Heights kept, newest first (to walk back to a fork point).
    pub fn heights_newest_first(&self) -> Vec<(u64, B256)> {
        self.blocks
            .read()
            .map(|b| b.iter().rev().map(|(n, h)| (*n, *h)).collect())
            .unwrap_or_default()
    }
}
