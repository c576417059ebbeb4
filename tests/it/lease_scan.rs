//! The supervisor's scan for work nobody drives: which submitters have open
//! intents and no live lease of this process, found with one index probe
//! per submitter rather than a read of every open intent.

use crate::common::{db::insert_intents, TestDb};
use alloy::primitives::Address;
use txmgr_actors::{store::lease_scan::unled_open_work, LeaseOwner, SubmitterKey};

const CHAIN: u64 = 31337;

fn key(byte: u8) -> SubmitterKey {
    SubmitterKey::new(CHAIN, Address::repeat_byte(byte))
}

#[tokio::test]
async fn the_scan_finds_each_unled_submitter_with_open_work_without_reading_every_open_intent() {
    let db = TestDb::migrated().await;
    let me = LeaseOwner::new("node-a", "i1");
    let (queued, busy, done, led, watched) =
        (key(0x01), key(0x02), key(0x03), key(0x04), key(0x05));
    insert_intents(&db.pool, queued, "QUEUED", 0, 2, false).await;
    // A busy submitter: 2,000 intents mined and awaiting finality, one sent.
    insert_intents(&db.pool, busy, "TRACKING", 0, 2000, true).await;
    insert_intents(&db.pool, busy, "TRACKING", 2000, 1, false).await;
    insert_intents(&db.pool, done, "CONFIRMED", 0, 50, true).await;
    insert_intents(&db.pool, led, "QUEUED", 0, 3, false).await;
    // `led`'s lease is this process's, live.
    let request = txmgr_actors::LeaseRequest {
        submitter: led,
        owner: me.clone(),
        duration: crate::lease::LEASE,
        clock_skew: crate::lease::SKEW,
    };
    let _lease = txmgr_actors::store::acquire_or_renew(&db.pool, &request)
        .await
        .expect("lease query")
        .lease()
        .cloned()
        .expect("leads");
    sqlx::query("ANALYZE managed_tx")
        .execute(&db.pool)
        .await
        .expect("analyze");

    let mut tx = db.pool.begin().await.expect("begin");
    let unled = unled_open_work(&mut *tx, queued.chain_id, &me, &[watched.address_hex()])
        .await
        .expect("scan");
    let mut found: Vec<Address> = unled.iter().map(|w| w.submitter).collect();
    found.sort();
    assert_eq!(
        found,
        [queued.address, busy.address, watched.address],
        "open work not led here, and the submitter watched for funds"
    );
    assert!(unled.iter().all(|w| w.owner_node.is_none() && !w.mine));
    let rows_read = crate::common::db::managed_tx_rows_read(&mut tx).await;
    assert!(
        rows_read < 100,
        "the scan went through {rows_read} rows of managed_tx for 4 submitters"
    );
}
