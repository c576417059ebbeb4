//! The finality workers' read on every head: the mined intents awaiting
//! finality of their leaders, read from an index of their own rather than
//! by going through every intent in flight.

use crate::common::{db::insert_intents, TestDb};
use alloy::primitives::Address;
use txmgr_actors::{store::finality::mined_not_final, SubmitterKey};

const CHAIN: u64 = 31337;

/// `count` intents of `submitter` on the test chain (see [`insert_intents`]).
async fn insert(db: &TestDb, submitter: Address, state: &str, first: i64, count: i64, mined: bool) {
    let key = SubmitterKey::new(CHAIN, submitter);
    insert_intents(&db.pool, key, state, first, count, mined).await;
}

#[tokio::test]
async fn the_finality_read_returns_the_mined_intents_without_reading_the_unmined_ones() {
    let db = TestDb::migrated().await;
    let (busy, other, elsewhere) = (
        Address::repeat_byte(0x01),
        Address::repeat_byte(0x02),
        Address::repeat_byte(0x03),
    );
    // A busy submitter: 2,000 intents sent and not mined, 3 mined.
    insert(&db, busy, "TRACKING", 0, 2000, false).await;
    insert(&db, busy, "TRACKING", 2000, 2, true).await;
    insert(&db, busy, "STUCK", 2002, 1, true).await;
    // Final ones and another submitter's are not asked for.
    insert(&db, busy, "CONFIRMED", 3000, 20, true).await;
    insert(&db, other, "TRACKING", 0, 1, true).await;
    insert(&db, elsewhere, "TRACKING", 0, 5, true).await;
    sqlx::query("ANALYZE managed_tx")
        .execute(&db.pool)
        .await
        .expect("analyze");

    let mut tx = db.pool.begin().await.expect("begin");
    let chain = CHAIN.into();
    let mut mined = mined_not_final(&mut *tx, chain, &[busy, other], None)
        .await
        .expect("read");
    mined.sort_by_key(|m| (m.submitter, m.block_number));
    let found: Vec<(Address, u64)> = mined
        .iter()
        .map(|m| (m.submitter, m.block_number))
        .collect();
    assert_eq!(
        found,
        [(busy, 2000), (busy, 2001), (busy, 2002), (other, 0)]
    );
    assert!(mined.iter().all(|m| m.status.as_deref() == Some("0x1")));
    // On a reorg: only those above the fork.
    let above = mined_not_final(&mut *tx, chain, &[busy, other], Some(2000))
        .await
        .expect("read above the fork");
    let mut blocks: Vec<u64> = above.iter().map(|m| m.block_number).collect();
    blocks.sort_unstable();
    assert_eq!(blocks, [2001, 2002]);
    let rows_read = crate::common::db::managed_tx_rows_read(&mut tx).await;
    assert!(
        rows_read < 100,
        "two reads went through {rows_read} rows of managed_tx for 4 mined intents"
    );
}
