//! The window's bookkeeping, without I/O.

use super::*;

fn at(seq: i64) -> FeedCursor {
    FeedCursor::new(10, seq)
}

#[test]
fn the_cursor_moves_up_to_the_first_event_not_done() {
    let mut window = Window::resume(at(0), []);
    assert_eq!(window.push(at(1), "a", true), Pushed::Waits);
    assert_eq!(window.push(at(2), "b", true), Pushed::Waits);
    assert_eq!(window.push(at(3), "a", false), Pushed::Done, "not wanted");
    assert_eq!(window.push(at(4), "a", true), Pushed::Waits);
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
    assert_eq!(window.len(), 2, "b's done event left memory");

    window.finish("a", at(1));
    assert_eq!(
        window.heads(),
        vec![("a".into(), at(4))],
        "a's next, in order"
    );
    let progress = window.progress();
    assert_eq!(progress.cursor, Some(at(3)), "just before a's next");
    window.committed(&progress);
    assert_eq!(window.durable(), at(3));
    assert_eq!(window.len(), 1);
    window.finish("a", at(4));
    let progress = window.progress();
    assert_eq!(progress.cursor, Some(at(4)), "all read is done");
    window.committed(&progress);
    assert_eq!(window.len(), 0);
}

#[test]
fn done_markers_from_before_are_skipped_and_rereads_ignored() {
    let mut window = Window::resume(at(5), [at(4), at(7)]);
    assert_eq!(window.push(at(6), "a", true), Pushed::Waits);
    assert_eq!(window.push(at(7), "a", true), Pushed::Done, "done before");
    assert_eq!(window.push(at(6), "a", true), Pushed::Done, "already read");
    assert_eq!(window.heads(), vec![("a".into(), at(6))]);
    window.finish("a", at(6));
    assert_eq!(window.progress().cursor, Some(at(7)));
    assert_eq!(window.read_to(), at(7));
}

#[test]
fn a_blocked_head_keeps_its_submitter_bounded_and_the_others_moving() {
    let mut window = Window::resume(at(0), []);
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        at(seq)
    };
    let mut count = 0;
    // a's head never finishes; a has far more events than it may keep.
    let a_head = next();
    assert_eq!(window.push(a_head, "a", true), Pushed::Waits);
    for _ in 1..PER_SUBMITTER {
        assert_eq!(window.push(next(), "a", true), Pushed::Waits);
    }
    let first_parked = next();
    assert_eq!(window.push(first_parked, "a", true), Pushed::Parked);
    // 3,000 of b's, each delivered and committed: memory stays bounded.
    for _ in 0..3_000 {
        let b = next();
        assert_eq!(window.push(b, "b", true), Pushed::Waits);
        count += 1;
        if count % 7 == 0 {
            assert_eq!(window.push(next(), "a", true), Pushed::Parked);
        }
        window.finish("b", b);
        let progress = window.progress();
        window.committed(&progress);
        assert!(window.len() <= PER_SUBMITTER + 1, "{}", window.len());
    }
    assert_eq!(window.durable(), at(0), "the cursor waits for a's head");
    assert!(
        window.due_for_refill().is_empty(),
        "a's queue is still full"
    );

    // a's queue empties: its events are read again from the parked one.
    let kept: Vec<FeedCursor> = window.heads().iter().map(|(_, c)| *c).collect();
    assert_eq!(kept, vec![a_head]);
    for _ in 0..PER_SUBMITTER {
        let head = window.heads()[0].1;
        window.finish("a", head);
    }
    let progress = window.progress();
    assert_eq!(progress.cursor, Some(just_before(first_parked)));
    window.committed(&progress);
    assert_eq!(window.due_for_refill(), vec![("a".into(), first_parked)]);
    let rows = vec![(first_parked, true), (at(first_parked.seq() + 10), true)];
    let waiting = window.refill("a", &rows, true);
    assert_eq!(waiting, vec![first_parked, at(first_parked.seq() + 10)]);
    assert!(window.due_for_refill().is_empty(), "unparked");
    assert_eq!(window.heads(), vec![("a".into(), first_parked)]);
}

#[test]
fn a_partial_refill_parks_again_after_the_last_row_read() {
    let mut window = Window::resume(at(0), [at(3)]);
    for seq in 1..=PER_SUBMITTER as i64 {
        window.push(at(seq + 10), "a", true);
    }
    assert_eq!(window.push(at(1000), "a", true), Pushed::Parked);
    assert_eq!(window.push(at(1001), "a", true), Pushed::Parked);
    while let Some((_, head)) = window.heads().first().cloned() {
        window.finish("a", head);
    }
    let waiting = window.refill("a", &[(at(1000), true)], false);
    assert_eq!(waiting, vec![at(1000)]);
    assert_eq!(window.parked.get("a"), Some(&at(1001)));
    assert_eq!(window.progress().cursor, Some(at(999)));
}
