//! The local, monotonic deadline of a held lease (README "Data model and leases":
//! `valid_until`), shared by every copy of its [`LeaseGuard`](super::LeaseGuard)
//! and by the node's lease keeper.
//!
//! One node-level task renews all of a node's leases at once; the leader
//! checks its deadline before every broadcast. Both must see the same value,
//! so the deadline is a cell, not a copy: a renewal made anywhere (the keeper,
//! or the leader renewing in line) moves it forward for every holder of the
//! guard, and a loss ends it for all of them at once.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

/// The process-wide origin the cell's nanoseconds count from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Nanoseconds of `at` after the origin, never 0 (0 marks an ended lease).
/// An instant before the origin is a deadline already past: it is kept as
/// the earliest representable one, which is just as past.
fn encode(at: Instant) -> u64 {
    let nanos = at.saturating_duration_since(origin()).as_nanos();
    u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
}

/// A lease's local deadline: moves only forward, and once ended stays ended
/// (a lost lease is never valid again with the same guard).
#[derive(Debug, Clone)]
pub struct LeaseDeadline(Arc<AtomicU64>);

impl LeaseDeadline {
    /// A deadline at `until`.
    pub fn new(until: Instant) -> Self {
        Self(Arc::new(AtomicU64::new(encode(until))))
    }

    /// The deadline, or None once the lease was found lost.
    pub fn until(&self) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(origin() + Duration::from_nanos(nanos)),
        }
    }

    /// Moves the deadline to `until` if that is later (a renewal; an answer
    /// to an older request that arrives late must not shorten it). An ended
    /// deadline stays ended.
    pub fn extend_to(&self, until: Instant) {
        let wanted = encode(until);
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                (current != 0 && wanted > current).then_some(wanted)
            });
    }

    /// Ends the lease locally at once: every holder of the guard stops acting.
    pub fn end(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// True when `other` is this very cell (the same lease, not just an equal
    /// deadline).
    pub fn same_cell(&self, other: &LeaseDeadline) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_moves_only_forward_and_an_ended_one_stays_ended() {
        let now = Instant::now();
        let deadline = LeaseDeadline::new(now + Duration::from_secs(5));
        let copy = deadline.clone();
        deadline.extend_to(now + Duration::from_secs(2));
        assert!(copy.until() >= Some(now + Duration::from_secs(5)));
        deadline.extend_to(now + Duration::from_secs(9));
        assert!(copy.until() >= Some(now + Duration::from_secs(9)));
        copy.end();
        assert_eq!(deadline.until(), None);
        deadline.extend_to(now + Duration::from_secs(20));
        assert_eq!(deadline.until(), None, "a lost lease is never valid again");
        assert!(deadline.same_cell(&copy));
        assert!(!deadline.same_cell(&LeaseDeadline::new(now)));
    }

    #[test]
    fn a_deadline_in_the_past_reads_as_passed_not_as_ended() {
        let past = Instant::now()
            .checked_sub(Duration::from_secs(1))
            .unwrap_or_else(Instant::now);
        let deadline = LeaseDeadline::new(past);
        let until = deadline.until().expect("not ended");
        assert!(until <= Instant::now());
    }
}
