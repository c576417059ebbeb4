//! Which fenced commits may skip the WAL flush (README "Data model and leases"): only
//! writes recovery can reconstruct. An unknown broadcast answer's
//! `maybe_pooled` mark cannot be reconstructed — losing it could release a
//! nonce whose bytes sit in a pool — so it turns durability back on.

use crate::common::DEV;

use std::time::Duration;

use crate::common::TestDb;
use alloy::primitives::B256;
use txmgr_actors::{
    store::{self, pipeline, resubmit_claims},
    FencedTx, LeaseOwner, LeaseRequest, SubmitterKey,
};

async fn relaxed(db: &TestDb) -> FencedTx {
    let request = LeaseRequest {
        submitter: SubmitterKey::new(31337, DEV.parse().expect("address")),
        owner: LeaseOwner::new("a", "i1"),
        duration: Duration::from_secs(10),
        clock_skew: Duration::from_millis(500),
    };
    let outcome = store::acquire_or_renew(&db.pool, &request)
        .await
        .expect("lease");
    let lease = outcome.lease().cloned().expect("leads");
    let mut ftx = FencedTx::begin(&db.pool, &lease, "record_broadcast")
        .await
        .expect("fenced");
    ftx.relax_durability().await.expect("relax");
    ftx
}

async fn synchronous_commit(ftx: &mut FencedTx) -> String {
    sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(ftx.conn())
        .await
        .expect("show")
}

fn retry(unknown: bool) -> pipeline::RetryLater {
    pipeline::RetryLater {
        tx_id: uuid::Uuid::now_v7(),
        tx_hash: B256::repeat_byte(1),
        error: "timeout".into(),
        unknown,
    }
}

#[tokio::test]
async fn a_known_refusal_may_commit_relaxed_but_an_unknown_answer_commits_durably() {
    let db = TestDb::migrated().await;
    let mut ftx = relaxed(&db).await;
    pipeline::record_retry(&mut ftx, &[retry(false)], Duration::from_secs(1))
        .await
        .expect("retry");
    assert_eq!(synchronous_commit(&mut ftx).await, "off");
    pipeline::record_retry(
        &mut ftx,
        &[retry(false), retry(true)],
        Duration::from_secs(1),
    )
    .await
    .expect("retry");
    assert_eq!(synchronous_commit(&mut ftx).await, "on");
    ftx.rollback().await.expect("rollback");

    let mut ftx = relaxed(&db).await;
    resubmit_claims::mark_maybe_pooled(&mut ftx, uuid::Uuid::now_v7())
        .await
        .expect("mark");
    assert_eq!(synchronous_commit(&mut ftx).await, "on");
    ftx.rollback().await.expect("rollback");
}
