//! The in-memory index of every attempt hash this node's leaders track: what
//! makes receipt discovery O(1) RPC per block instead of O(tracked).

use alloy::primitives::{Address, B256};
use dashmap::DashMap;
use uuid::Uuid;

/// Who an attempt hash belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracked {
    /// The submitter whose actor records the receipt.
    pub submitter: Address,
    /// The intent.
    pub tx_id: Uuid,
}

/// Attempt hash → intent, plus the reverse map to drop an intent's hashes.
#[derive(Debug, Default)]
pub struct ReceiptIndex {
    by_hash: DashMap<B256, Tracked>,
    by_intent: DashMap<Uuid, Vec<B256>>,
}

impl ReceiptIndex {
    /// Tracks one attempt hash.
    pub fn insert(&self, hash: B256, tracked: Tracked) {
        self.by_hash.insert(hash, tracked);
        let mut hashes = self.by_intent.entry(tracked.tx_id).or_default();
        if !hashes.contains(&hash) {
            hashes.push(hash);
        }
    }

    /// The owner of a hash, if tracked.
    pub fn lookup(&self, hash: &B256) -> Option<Tracked> {
        self.by_hash.get(hash).map(|t| *t)
    }

    /// Stops tracking an intent (final, or requeued with a new nonce).
    pub fn remove_intent(&self, tx_id: Uuid) {
        if let Some((_, hashes)) = self.by_intent.remove(&tx_id) {
            for hash in hashes {
                self.by_hash.remove(&hash);
            }
        }
    }

    /// Stops tracking everything of a submitter (its lease is gone).
    pub fn remove_submitter(&self, submitter: Address) {
        let intents: Vec<Uuid> = self
            .by_hash
            .iter()
            .filter(|e| e.value().submitter == submitter)
            .map(|e| e.value().tx_id)
            .collect();
        for tx_id in intents {
            self.remove_intent(tx_id);
        }
    }

    /// Tracked hashes (for the ops view and tests).
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// True when nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_and_submitters_are_removed_with_all_their_hashes() {
        let index = ReceiptIndex::default();
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let (x, y, z) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        index.insert(
            B256::repeat_byte(1),
            Tracked {
                submitter: a,
                tx_id: x,
            },
        );
        index.insert(
            B256::repeat_byte(2),
            Tracked {
                submitter: a,
                tx_id: x,
            },
        );
        index.insert(
            B256::repeat_byte(3),
            Tracked {
                submitter: a,
                tx_id: y,
            },
        );
        index.insert(
            B256::repeat_byte(4),
            Tracked {
                submitter: b,
                tx_id: z,
            },
        );
        assert_eq!(
            index.lookup(&B256::repeat_byte(2)).map(|t| t.tx_id),
            Some(x)
        );
        index.remove_intent(x);
        assert_eq!(index.len(), 2);
        index.remove_submitter(a);
        assert_eq!(index.len(), 1);
        assert_eq!(
            index.lookup(&B256::repeat_byte(4)).map(|t| t.submitter),
            Some(b)
        );
    }
}
