//! The holder's in-memory view of the feed between its durable cursor and
//! what it has read: which events wait, in which order per submitter, and
//! which done ones still need their marker saved. Pure bookkeeping, no I/O.
//!
//! ```text
//! durable cursor ─┐                                   ┌─ read_to
//!                 ▼                                   ▼
//!   … done ─ [a1 wait][b1 done, unsaved][a2 wait][b2 …] ─ (not read yet)
//! queues: a: a1, a2 (one at a time, in order) — at most PER_SUBMITTER kept;
//! the rest of a's events are parked: not kept, read again from the database
//! (`store::completions::read_submitter`) once a's queue has emptied.
//! ```
//!
//! Memory is bounded per submitter, never by the oldest pending event: a
//! done event's marker is saved at the next commit and then it leaves
//! memory, and a submitter whose head keeps failing (a receiver that
//! answers it 429 for an hour) keeps at most [`PER_SUBMITTER`] events here,
//! so the others' events are still read and delivered. The durable cursor
//! stays below the first event not done (a waiting one, or a parked
//! submitter's first unread one): events done beyond it are skipped through
//! their markers by a new holder.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::store::completions::FeedCursor;

/// Waiting events kept in memory per submitter; more are parked.
pub(super) const PER_SUBMITTER: usize = 64;

/// One event kept in memory.
#[derive(Debug)]
struct Entry {
    /// Delivered or dead-lettered.
    done: bool,
    /// Its done marker is in the database (or none is needed).
    saved: bool,
}

/// What became of an event read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushed {
    /// It waits for delivery in its submitter's queue.
    Waits,
    /// Nothing to deliver: not wanted, done by a previous holder, or read
    /// before.
    Done,
    /// Its submitter has [`PER_SUBMITTER`] events waiting: it is read again
    /// later.
    Parked,
}

/// Events between the durable cursor and the last one read.
#[derive(Debug, Default)]
pub(super) struct Window {
    durable: FeedCursor,
    read_to: FeedCursor,
    /// Waiting events, and done ones whose marker is not saved yet.
    entries: BTreeMap<FeedCursor, Entry>,
    /// Done beyond the cursor before this holder took over (from the database).
    done_before: BTreeSet<FeedCursor>,
    /// Waiting events per submitter, in feed order.
    queues: HashMap<String, VecDeque<FeedCursor>>,
    /// Per parked submitter, the position from which its events are read
    /// again: at or before its first event not kept.
    parked: HashMap<String, FeedCursor>,
}

/// What a commit should write for the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct WindowProgress {
    /// The new cursor, when it moved.
    pub(super) cursor: Option<FeedCursor>,
    /// Done events beyond the new cursor whose markers are not saved yet.
    pub(super) done: Vec<FeedCursor>,
}

/// The position just before `at`: every row below `at` was read before `at`
/// (the feed serves rows in `(xid, seq)` order and only once no earlier row
/// can appear), so a cursor here covers exactly the rows before it.
fn just_before(at: FeedCursor) -> FeedCursor {
    if at.seq() > 0 {
        FeedCursor::new(at.xid(), at.seq() - 1)
    } else {
        FeedCursor::new(at.xid().saturating_sub(1), i64::MAX)
    }
}

impl Window {
    /// Resumes after `cursor`, skipping the events in `done`.
    pub(super) fn resume(cursor: FeedCursor, done: impl IntoIterator<Item = FeedCursor>) -> Self {
        Self {
            durable: cursor,
            read_to: cursor,
            done_before: done.into_iter().filter(|d| *d > cursor).collect(),
            ..Self::default()
        }
    }

    /// The last event read: the next read continues after it.
    pub(super) fn read_to(&self) -> FeedCursor {
        self.read_to
    }

    /// Events held in memory (waiting, or done with a marker to save).
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds the next event read; `wanted` false (filtered out) makes it done
    /// at once.
    pub(super) fn push(&mut self, cursor: FeedCursor, submitter: &str, wanted: bool) -> Pushed {
        if cursor <= self.read_to {
            return Pushed::Done;
        }
        self.read_to = cursor;
        if !wanted {
            return Pushed::Done;
        }
        // A parked submitter's later events are read again with the parked
        // ones (done markers included), in order.
        if self.parked.contains_key(submitter) {
            return Pushed::Parked;
        }
        if self.done_before.remove(&cursor) {
            return Pushed::Done;
        }
        let queue = self.queues.entry(submitter.to_owned()).or_default();
        if queue.len() >= PER_SUBMITTER {
            self.parked.insert(submitter.to_owned(), cursor);
            return Pushed::Parked;
        }
        queue.push_back(cursor);
        self.entries.insert(
            cursor,
            Entry {
                done: false,
                saved: true,
            },
        );
        Pushed::Waits
    }

    /// Parked submitters whose queue has emptied, with the position to read
    /// their events again from (inclusive).
    pub(super) fn due_for_refill(&self) -> Vec<(String, FeedCursor)> {
        self.parked
            .iter()
            .filter(|(submitter, _)| self.queues.get(*submitter).is_none_or(VecDeque::is_empty))
            .map(|(submitter, from)| (submitter.clone(), *from))
            .collect()
    }

    /// Takes a parked submitter's events read again (`(cursor, wanted)` from
    /// its refill position, in order, up to [`PER_SUBMITTER`] of them;
    /// `complete` when that read reached `read_to`). Returns the events that
    /// now wait.
    pub(super) fn refill(
        &mut self,
        submitter: &str,
        rows: &[(FeedCursor, bool)],
        complete: bool,
    ) -> Vec<FeedCursor> {
        let Some(from) = self.parked.get(submitter).copied() else {
            return Vec::new();
        };
        let mut waiting = Vec::new();
        let mut last = None;
        for (cursor, wanted) in rows {
            if *cursor < from || *cursor > self.read_to {
                continue;
            }
            last = Some(*cursor);
            if !wanted || self.done_before.remove(cursor) {
                continue;
            }
            self.queues
                .entry(submitter.to_owned())
                .or_default()
                .push_back(*cursor);
            self.entries.insert(
                *cursor,
                Entry {
                    done: false,
                    saved: true,
                },
            );
            waiting.push(*cursor);
        }
        match last {
            Some(last) if !complete => {
                // Everything up to `last` is kept (or done): the rest is
                // read again from just after it.
                self.parked.insert(
                    submitter.to_owned(),
                    FeedCursor::new(last.xid(), last.seq().saturating_add(1)),
                );
            }
            _ => {
                self.parked.remove(submitter);
            }
        }
        waiting
    }

    /// The first waiting event of every submitter.
    pub(super) fn heads(&self) -> Vec<(String, FeedCursor)> {
        self.queues
            .iter()
            .filter_map(|(submitter, queue)| queue.front().map(|c| (submitter.clone(), *c)))
            .collect()
    }

    /// Marks `cursor` (the head of `submitter`) done.
    pub(super) fn finish(&mut self, submitter: &str, cursor: FeedCursor) {
        if let Some(queue) = self.queues.get_mut(submitter) {
            if queue.front() == Some(&cursor) {
                queue.pop_front();
            }
            if queue.is_empty() {
                self.queues.remove(submitter);
            }
        }
        if let Some(entry) = self.entries.get_mut(&cursor) {
            entry.done = true;
            entry.saved = false;
        }
    }

    /// What to write: the cursor, moved up to just before the first event
    /// not done (or to the last read when none), and the unsaved done
    /// events beyond it.
    pub(super) fn progress(&self) -> WindowProgress {
        let first_waiting = self
            .entries
            .iter()
            .find(|(_, entry)| !entry.done)
            .map(|(at, _)| *at);
        let first_parked = self.parked.values().min().copied();
        let reach = match first_waiting.into_iter().chain(first_parked).min() {
            Some(barrier) => just_before(barrier),
            None => self.read_to,
        };
        let cursor = (reach > self.durable).then_some(reach);
        let covered = self.durable.max(reach);
        let done = self
            .entries
            .range(..)
            .filter(|(at, entry)| **at > covered && entry.done && !entry.saved)
            .map(|(at, _)| *at)
            .collect();
        WindowProgress { cursor, done }
    }

    /// Takes a committed [`WindowProgress`] in: what the cursor covers and
    /// the done events whose markers are saved leave memory.
    pub(super) fn committed(&mut self, progress: &WindowProgress) {
        if let Some(cursor) = progress.cursor {
            self.durable = self.durable.max(cursor);
            let rest = self.entries.split_off(&cursor);
            self.entries = rest;
            self.entries.remove(&cursor);
            let durable = self.durable;
            self.done_before.retain(|at| *at > durable);
        }
        for at in &progress.done {
            if let Some(entry) = self.entries.get_mut(at) {
                entry.saved = true;
            }
        }
        self.entries.retain(|_, entry| !(entry.done && entry.saved));
    }

    /// The durable cursor as last committed.
    pub(super) fn durable(&self) -> FeedCursor {
        self.durable
    }
}

#[cfg(test)]
mod tests;
