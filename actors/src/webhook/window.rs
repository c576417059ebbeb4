//! The holder's in-memory view of the feed between its durable cursor and
//! what it has read: which events are done, which wait, and in which order
//! per submitter. Pure bookkeeping, no I/O.
//!
//! ```text
//! durable cursor ─┐                               ┌─ read_to
//!                 ▼                               ▼
//!   … done ─ [e1 done][e2 wait][e3 done][e4 wait] ─ (not read yet)
//!             └ folded into the cursor at the next commit
//! queues: submitter A: e2, e4 (one at a time, in order); submitter B: —
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::store::completions::FeedCursor;

/// One read event.
#[derive(Debug)]
struct Entry {
    /// Delivered, dead-lettered or not wanted.
    done: bool,
    /// Its done marker is in the database (or none is needed).
    saved: bool,
}

/// Events between the durable cursor and the last one read.
#[derive(Debug, Default)]
pub(super) struct Window {
    durable: FeedCursor,
    read_to: FeedCursor,
    entries: BTreeMap<FeedCursor, Entry>,
    /// Done beyond the cursor before this holder took over (from the database).
    done_before: BTreeSet<FeedCursor>,
    /// Waiting events per submitter, in feed order.
    queues: HashMap<String, VecDeque<FeedCursor>>,
}

/// What a commit should write for the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct WindowProgress {
    /// The new cursor, when the done prefix moved.
    pub(super) cursor: Option<FeedCursor>,
    /// Done events beyond the new cursor whose markers are not saved yet.
    pub(super) done: Vec<FeedCursor>,
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

    /// Events read and not yet folded into the durable cursor.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds the next event read. `wanted` false (filtered out) makes it done
    /// at once; so does a done marker from before. Returns true when it
    /// waits for delivery.
    pub(super) fn push(&mut self, cursor: FeedCursor, submitter: &str, wanted: bool) -> bool {
        if cursor <= self.read_to {
            return false;
        }
        self.read_to = cursor;
        let waits = wanted && !self.done_before.remove(&cursor);
        self.entries.insert(
            cursor,
            Entry {
                done: !waits,
                saved: true,
            },
        );
        if waits {
            self.queues
                .entry(submitter.to_owned())
                .or_default()
                .push_back(cursor);
        }
        waits
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

    /// What to write: the end of the done prefix, if it moved, and the
    /// unsaved done events after it.
    pub(super) fn progress(&self) -> WindowProgress {
        let mut cursor = None;
        let mut rest = self.entries.iter().peekable();
        while let Some((at, _)) = rest.next_if(|(_, e)| e.done) {
            cursor = Some(*at);
        }
        let done = rest
            .filter(|(_, e)| e.done && !e.saved)
            .map(|(at, _)| *at)
            .collect();
        WindowProgress { cursor, done }
    }

    /// Takes a committed [`WindowProgress`] in: the prefix leaves memory and
    /// the markers count as saved.
    pub(super) fn committed(&mut self, progress: &WindowProgress) {
        if let Some(cursor) = progress.cursor {
            self.durable = self.durable.max(cursor);
            let rest = self.entries.split_off(&cursor);
            self.entries = rest;
            self.entries.remove(&cursor);
        }
        for at in &progress.done {
            if let Some(entry) = self.entries.get_mut(at) {
                entry.saved = true;
            }
        }
    }

    /// The durable cursor as last committed.
    pub(super) fn durable(&self) -> FeedCursor {
        self.durable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: i64) -> FeedCursor {
        FeedCursor::new(10, seq)
    }

    #[test]
    fn the_cursor_moves_over_the_done_prefix_only() {
        let mut window = Window::resume(at(0), []);
        assert!(window.push(at(1), "a", true));
        assert!(window.push(at(2), "b", true));
        assert!(!window.push(at(3), "a", false), "not wanted: done at once");
        assert!(window.push(at(4), "a", true));
        let mut heads = window.heads();
        heads.sort();
        assert_eq!(heads, vec![("a".into(), at(1)), ("b".into(), at(2))]);

        window.finish("b", at(2));
        let progress = window.progress();
        assert_eq!(
            progress,
            WindowProgress {
                cursor: None,
                done: vec![at(2)]
            }
        );
        window.committed(&progress);
        assert_eq!(window.progress(), WindowProgress::default(), "marker saved");

        window.finish("a", at(1));
        assert_eq!(
            window.heads(),
            vec![("a".into(), at(4))],
            "a's next, in order"
        );
        let progress = window.progress();
        assert_eq!(progress.cursor, Some(at(3)), "1 done, 2 done, 3 not wanted");
        window.committed(&progress);
        assert_eq!(window.durable(), at(3));
        assert_eq!(window.len(), 1);
    }

    #[test]
    fn done_markers_from_before_are_skipped_and_rereads_ignored() {
        let mut window = Window::resume(at(5), [at(4), at(7)]);
        assert!(window.push(at(6), "a", true));
        assert!(
            !window.push(at(7), "a", true),
            "done by the previous holder"
        );
        assert!(!window.push(at(6), "a", true), "already read");
        assert_eq!(window.heads(), vec![("a".into(), at(6))]);
        window.finish("a", at(6));
        assert_eq!(window.progress().cursor, Some(at(7)));
        assert_eq!(window.read_to(), at(7));
    }
}
