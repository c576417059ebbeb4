//! The completion feed against real PostgreSQL: writers that commit out of
//! order and a randomized stress (`GET /v1/completions` and its long polls
//! are in `completions_http`).
//!
//! The feed serves only rows below its horizon, per database since
//! migration `20261206000002` (before, the server-wide snapshot `xmin`: a
//! transaction held open by one test held back every other feed on the
//! server). The feed tests still run one at a time — under nextest by the
//! `feed` test group (`.config/nextest.toml`, one process per test), under
//! `cargo test` by [`SERIAL`] (one process) — so that their many writers do
//! not compete on two cores. A slow transaction can only delay a feed, so every
//! "eventually served" assertion waits with a deadline.

use std::{collections::HashSet, sync::Arc, time::Duration};

use crate::common::TestDb;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sqlx::{PgConnection, PgPool};
use tokio::{sync::Mutex, time::Instant};
use txmgr_actors::store::completions::{self, CompletionRow, FeedCursor};
use uuid::Uuid;

pub(crate) const CHAIN: u64 = 31337;
pub(crate) const OTHER_CHAIN: u64 = 1;
pub(crate) const SUBMITTER: &str = "0x1111111111111111111111111111111111111111";
/// How long a row may be held back by activity elsewhere on the server.
pub(crate) const SERVED_WITHIN: Duration = Duration::from_secs(30);
/// Pause between empty reads while waiting for a row.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// One feed test at a time under `cargo test`: see the module documentation.
pub(crate) static SERIAL: Mutex<()> = Mutex::const_new(());

/// Inserts a finished intent (no nonce needed for CANCELLED) on `chain`.
pub(crate) async fn insert_intent(
    conn: &mut PgConnection,
    chain: u64,
    request_id: Option<&str>,
) -> Uuid {
    let tx_id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent, state)
         VALUES ($1, $2, $3, $4, $5, '{}'::jsonb, 'CANCELLED')",
    )
    .bind(tx_id)
    .bind(i64::try_from(chain).expect("test chain id fits"))
    .bind(SUBMITTER)
    .bind(request_id)
    .bind(vec![0u8; 32])
    .execute(conn)
    .await
    .expect("insert intent");
    tx_id
}

/// An intent and its completion, committed in one transaction.
pub(crate) async fn complete(pool: &PgPool, chain: u64, request_id: Option<&str>) -> Uuid {
    let mut tx = pool.begin().await.expect("begin");
    let tx_id = insert_intent(&mut tx, chain, request_id).await;
    completions::record(&mut tx, tx_id).await.expect("record");
    tx.commit().await.expect("commit");
    tx_id
}

/// Intents committed up front, so the race tests' transactions write only
/// their completion row.
pub(crate) async fn committed_intent(pool: &PgPool) -> Uuid {
    let mut conn = pool.acquire().await.expect("connection");
    insert_intent(&mut conn, CHAIN, None).await
}

async fn read(
    pool: &PgPool,
    after: Option<FeedCursor>,
    limit: u32,
) -> (Vec<CompletionRow>, Option<FeedCursor>) {
    completions::read(pool, after, limit)
        .await
        .expect("read feed")
}

/// A reader that pages with `next_after`, remembering everything served.
struct Reader {
    after: Option<FeedCursor>,
    served: Vec<CompletionRow>,
}

impl Reader {
    fn new() -> Self {
        Self {
            after: None,
            served: Vec::new(),
        }
    }

    /// Reads one page; returns how many rows it held.
    async fn page(&mut self, pool: &PgPool, limit: u32) -> usize {
        let (rows, next) = read(pool, self.after, limit).await;
        if rows.is_empty() {
            assert_eq!(next, self.after, "an empty page hands the cursor back");
        } else {
            let last = FeedCursor::parse(&rows[rows.len() - 1].cursor).expect("own cursor");
            assert_eq!(next, Some(last), "next_after is the last row's cursor");
        }
        self.after = next;
        let count = rows.len();
        self.served.extend(rows);
        count
    }

    /// Pages until `count` rows have been served in total; panics after
    /// [`SERVED_WITHIN`].
    async fn until_served(&mut self, pool: &PgPool, count: usize, limit: u32) {
        let deadline = Instant::now() + SERVED_WITHIN;
        while self.served.len() < count {
            if self.page(pool, limit).await == 0 {
                assert!(
                    Instant::now() < deadline,
                    "only {} of {count} rows served within {SERVED_WITHIN:?}",
                    self.served.len()
                );
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        }
    }

    fn tx_ids(&self) -> Vec<Uuid> {
        self.served.iter().filter_map(|row| row.tx_id).collect()
    }

    fn cursors(&self) -> Vec<FeedCursor> {
        self.served
            .iter()
            .map(|row| FeedCursor::parse(&row.cursor).expect("own cursor"))
            .collect()
    }
}

/// The cursor of `tx_id`'s completion row, read directly (visible or not to the feed).
pub(crate) async fn cursor_of(pool: &PgPool, tx_id: Uuid) -> FeedCursor {
    let (xid, seq): (String, i64) =
        sqlx::query_as("SELECT xid::text, seq FROM tx_completion WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_one(pool)
            .await
            .expect("completion row");
    FeedCursor::new(xid.parse().expect("xid digits"), seq)
}

#[tokio::test]
async fn a_later_commit_with_a_lower_seq_is_never_skipped() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let (a, b) = (
        committed_intent(&db.pool).await,
        committed_intent(&db.pool).await,
    );

    // T1 writes first: the lower xid and the lower seq. T2 writes and commits
    // while T1 is still open.
    let mut t1 = db.pool.begin().await.expect("begin t1");
    completions::record(&mut t1, a).await.expect("t1 record");
    let mut t2 = db.pool.begin().await.expect("begin t2");
    completions::record(&mut t2, b).await.expect("t2 record");
    t2.commit().await.expect("t2 commits first");

    // A reader paging by seq alone would now serve b and move past a's seq.
    let visible: Vec<i64> = sqlx::query_scalar("SELECT seq FROM tx_completion ORDER BY seq")
        .fetch_all(&db.pool)
        .await
        .expect("visible seqs");
    assert_eq!(visible, vec![cursor_of(&db.pool, b).await.seq()]);

    let mut reader = Reader::new();
    for _ in 0..5 {
        assert_eq!(
            reader.page(&db.pool, 1).await,
            0,
            "b served while a is open"
        );
    }
    assert_eq!(reader.after, None);

    // The delay stands for a slow commit; the feed must simply wait for it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    t1.commit().await.expect("t1 commits");
    reader.until_served(&db.pool, 2, 1).await;
    assert_eq!(reader.tx_ids(), vec![a, b]);
    let cursors = reader.cursors();
    assert!(cursors[0].xid() < cursors[1].xid() && cursors[0].seq() < cursors[1].seq());

    // Nothing more, and the cursor stays where it was.
    let at_end = reader.after;
    assert_eq!(reader.page(&db.pool, 1).await, 0);
    assert_eq!(reader.after, at_end);
    assert_eq!(reader.served.len(), 2);
}

#[tokio::test]
async fn a_lower_xid_with_a_higher_seq_is_never_skipped() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let mut reader = Reader::new();
    for a_commits_first in [true, false] {
        let (a, b) = (
            committed_intent(&db.pool).await,
            committed_intent(&db.pool).await,
        );
        let start = reader.served.len();

        // T_a takes its xid first; T_b then writes first (the lower seq).
        let mut t_a = db.pool.begin().await.expect("begin t_a");
        sqlx::query("SELECT pg_current_xact_id()")
            .execute(&mut *t_a)
            .await
            .expect("assign t_a's xid");
        let mut t_b = db.pool.begin().await.expect("begin t_b");
        completions::record(&mut t_b, b).await.expect("t_b record");
        completions::record(&mut t_a, a).await.expect("t_a record");

        if a_commits_first {
            t_a.commit().await.expect("t_a commits");
            // a is below b's xid, the horizon while b is open: served alone.
            reader.until_served(&db.pool, start + 1, 1).await;
            assert_eq!(reader.tx_ids()[start..], [a]);
            for _ in 0..5 {
                assert_eq!(reader.page(&db.pool, 1).await, 0, "b served while open");
            }
            t_b.commit().await.expect("t_b commits");
        } else {
            t_b.commit().await.expect("t_b commits");
            for _ in 0..5 {
                assert_eq!(reader.page(&db.pool, 1).await, 0, "b served before a");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            t_a.commit().await.expect("t_a commits");
        }
        reader.until_served(&db.pool, start + 2, 1).await;
        assert_eq!(
            reader.tx_ids()[start..],
            [a, b],
            "a_commits_first={a_commits_first}"
        );

        let cursors = reader.cursors();
        let (ca, cb) = (cursors[start], cursors[start + 1]);
        assert!(ca.xid() < cb.xid(), "a holds the lower xid");
        assert!(ca.seq() > cb.seq(), "a drew the higher seq");
        assert_eq!(ca, cursor_of(&db.pool, a).await);
        assert_eq!(cb, cursor_of(&db.pool, b).await);
        assert_eq!(reader.page(&db.pool, 1).await, 0);
    }
}

/// One writer's deterministic schedule: per transaction, how many rows,
/// pauses before the first write and before the end, and whether it rolls back.
struct Txn {
    rows: usize,
    pause_before_write: Duration,
    pause_before_end: Duration,
    roll_back: bool,
}

fn schedule(seed: u64, transactions: usize) -> Vec<Txn> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..transactions)
        .map(|_| Txn {
            rows: rng.random_range(1..=3),
            pause_before_write: Duration::from_millis(rng.random_range(0..10)),
            pause_before_end: Duration::from_millis(rng.random_range(0..30)),
            roll_back: rng.random_ratio(1, 8),
        })
        .collect()
}

/// Runs a schedule; returns the intents whose completions committed, and
/// those rolled back.
async fn write(pool: PgPool, plan: Vec<Txn>) -> (Vec<Uuid>, Vec<Uuid>) {
    let (mut committed, mut rolled_back) = (Vec::new(), Vec::new());
    for txn in plan {
        let mut tx = pool.begin().await.expect("begin");
        // Deliberate delays: they make transactions overlap and commit out of order.
        tokio::time::sleep(txn.pause_before_write).await;
        let mut ids = Vec::new();
        for _ in 0..txn.rows {
            let tx_id = insert_intent(&mut tx, CHAIN, None).await;
            completions::record(&mut tx, tx_id).await.expect("record");
            ids.push(tx_id);
        }
        tokio::time::sleep(txn.pause_before_end).await;
        if txn.roll_back {
            tx.rollback().await.expect("rollback");
            rolled_back.extend(ids);
        } else {
            tx.commit().await.expect("commit");
            committed.extend(ids);
        }
    }
    (committed, rolled_back)
}

#[tokio::test]
async fn randomized_concurrent_writers_are_read_exactly_once() {
    const WRITERS: u64 = 6;
    const TRANSACTIONS: usize = 12;
    const SEED: u64 = 0x5eed_c0de;
    let _serial = SERIAL.lock().await;
    let db = TestDb::migrated().await;
    let reader_pool = db.connect_new_pool().await;

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write(db.pool.clone(), schedule(SEED ^ w, TRANSACTIONS))))
        .collect();
    let all_written = Arc::new(tokio::sync::Notify::new());
    let reader = tokio::spawn({
        let pool = reader_pool.clone();
        let all_written = all_written.clone();
        async move {
            let mut reader = Reader::new();
            let mut pages_while_writing = 0usize;
            let finished = all_written.notified();
            tokio::pin!(finished);
            loop {
                tokio::select! {
                    () = &mut finished => break,
                    served = reader.page(&pool, 3) => pages_while_writing += usize::from(served > 0),
                }
            }
            (reader, pages_while_writing)
        }
    });

    let (mut committed, mut rolled_back) = (Vec::new(), Vec::new());
    for writer in writers {
        let (c, r) = writer.await.expect("writer");
        committed.extend(c);
        rolled_back.extend(r);
    }
    all_written.notify_one();
    let (mut reader, pages_while_writing) = reader.await.expect("reader");
    assert!(
        pages_while_writing > 0,
        "the reader never overlapped the writers"
    );
    reader.until_served(&reader_pool, committed.len(), 3).await;

    let served = reader.tx_ids();
    let unique: HashSet<Uuid> = served.iter().copied().collect();
    assert_eq!(unique.len(), served.len(), "a row was served twice");
    let expected: HashSet<Uuid> = committed.iter().copied().collect();
    assert_eq!(
        unique, expected,
        "served set differs from the committed set"
    );
    assert!(rolled_back.iter().all(|id| !unique.contains(id)));
    let cursors = reader.cursors();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "not served in (xid, seq) order"
    );
    assert_eq!(reader.page(&reader_pool, 3).await, 0);
}

#[tokio::test]
async fn a_completion_row_commits_durably_even_in_a_relaxed_transaction() {
    let db = TestDb::migrated().await;
    let mut tx = db.pool.begin().await.expect("begin");
    // As record_broadcast does before it may reject an intent.
    sqlx::query("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await
        .expect("relax");
    let tx_id = insert_intent(&mut tx, CHAIN, None).await;
    completions::record(&mut tx, tx_id).await.expect("record");
    let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut *tx)
        .await
        .expect("show");
    assert_eq!(
        setting, "on",
        "a terminal write must wait for the WAL flush"
    );
    tx.commit().await.expect("commit");
}
