//! The current actor of each slot of a pool: the supervisor replaces a slot's
//! actor when it restarts one, and senders (the head watcher, the resubmit
//! timers) look the slot up at every send, so they reach the new actor.

use std::sync::RwLock;

use ractor::ActorRef;

/// One pool's workers by slot; a slot is empty until its first spawn.
#[derive(Debug)]
pub struct WorkerSlots<M> {
    slots: Vec<RwLock<Option<ActorRef<M>>>>,
}

impl<M> WorkerSlots<M> {
    /// `count` empty slots (at least one).
    pub fn new(count: usize) -> Self {
        Self {
            slots: (0..count.max(1)).map(|_| RwLock::new(None)).collect(),
        }
    }

    /// Number of slots (the pool's configured size, whether running or not).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false: a pool has one slot at least (clippy's pair of `len`).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The actor of `slot` now.
    pub fn get(&self, slot: usize) -> Option<ActorRef<M>> {
        self.slots
            .get(slot)
            .and_then(|s| s.read().ok().and_then(|a| a.clone()))
    }

    /// Puts a (re)started actor in `slot`.
    pub(crate) fn set(&self, slot: usize, actor: ActorRef<M>) {
        if let Some(mut current) = self.slots.get(slot).and_then(|s| s.write().ok()) {
            *current = Some(actor);
        }
    }

    /// The actor of every slot that has one.
    pub fn all(&self) -> Vec<ActorRef<M>> {
        (0..self.len()).filter_map(|slot| self.get(slot)).collect()
    }
}
