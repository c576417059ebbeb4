//! Messages that repeat (every poll tick, every `newHeads` notification,
//! every head) are coalesced: at most one of a kind waits in its receiver's
//! mailbox. ractor mailboxes are unbounded, so a receiver slower than the
//! tick — a finality worker behind a slow query, a SubmitterActor inside a
//! long fenced write — would otherwise collect one copy per tick, forever.
//!
//! Dropping the copies loses nothing because such a message only says "look
//! again": the receiver reads the newest state (the latest head, the
//! database) when it takes the message, and the sender repeats on the next
//! tick whatever is still true then.
//!
//! ```text
//! sender:   offer ── one queued already? ── yes ─► nothing sent
//!                                        └─ no ──► send, mark queued
//! receiver: take message ─► taken() (unmark) ─► read the newest state ─► act
//! ```
//!
//! The receiver unmarks *before* it reads, so a change after its read is
//! offered again and sent.

use std::sync::atomic::{AtomicBool, Ordering};

// Sequentially consistent throughout: a sender's "store the newest state,
// then see a message queued" and a receiver's "unmark, then read the newest
// state" must not both miss each other, which acquire/release alone allows.

/// "One is queued" for one kind of repeating message to one receiver.
#[derive(Debug, Default)]
pub struct Coalesced {
    queued: AtomicBool,
}

impl Coalesced {
    /// Sends with `send` unless one is queued already; false only when
    /// `send` failed (the receiver is gone).
    pub fn offer(&self, send: impl FnOnce() -> bool) -> bool {
        if self.queued.swap(true, Ordering::SeqCst) {
            return true;
        }
        if send() {
            return true;
        }
        self.queued.store(false, Ordering::SeqCst);
        false
    }

    /// The receiver took the message: the next offer sends again.
    pub fn taken(&self) {
        self.queued.store(false, Ordering::SeqCst);
    }

    /// Whether one is queued now.
    pub fn is_queued(&self) -> bool {
        self.queued.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_is_sent_until_it_is_taken() {
        let slot = Coalesced::default();
        let mut sent = 0;
        for _ in 0..100 {
            assert!(slot.offer(|| {
                sent += 1;
                true
            }));
        }
        assert_eq!(sent, 1);
        slot.taken();
        slot.offer(|| {
            sent += 1;
            true
        });
        assert_eq!(sent, 2);
    }

    #[test]
    fn a_failed_send_leaves_nothing_queued() {
        let slot = Coalesced::default();
        assert!(!slot.offer(|| false));
        assert!(!slot.is_queued());
        let mut sent = false;
        slot.offer(|| {
            sent = true;
            true
        });
        assert!(sent);
    }
}
