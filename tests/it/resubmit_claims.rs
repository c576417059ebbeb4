//! Claim before send: however many claimers race one due time — the timer
//! and the sweep of one leader, or two nodes across a take-over — exactly
//! one of them acts on it, and a node without the lease acts on nothing.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    txs::{attempts, create_transfer, wait_state},
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};
use txmgr_actors::{
    store::{self, resubmit_claims},
    FencedTx, LeaseOwner, LeaseRequest, SubmitterKey,
};

const WAIT: Duration = Duration::from_secs(30);

fn request(node: &str) -> LeaseRequest {
    LeaseRequest {
        submitter: SubmitterKey::new(31337, DEV_ADDRESS_0.parse().expect("address")),
        owner: LeaseOwner::new(node, "i1"),
        duration: Duration::from_secs(30),
        clock_skew: Duration::from_millis(500),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_of_one_due_time_are_disjoint_and_a_stale_holder_claims_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        r#"resubmit_interval = "60s""#,
    );
    let node = TestNode::start(&toml).await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(create_transfer(&node, &format!("c{i}"), 1).await);
    }
    for id in &ids {
        wait_state(&db.pool, *id, "TRACKING", WAIT).await;
    }
    node.stop().await;

    // Everything is due now; two claimers holding the same lease race.
    let lease = store::acquire_or_renew(&db.pool, &request("t"))
        .await
        .expect("lease")
        .lease()
        .cloned()
        .expect("t leads");
    sqlx::query("UPDATE managed_tx SET next_resubmit_at = now() - interval '1 second'")
        .execute(&db.pool)
        .await
        .expect("make due");
    let claim = |lease: store::LeaseGuard, pool: sqlx::PgPool| async move {
        let mut ftx = FencedTx::begin(&pool, &lease, "claim_resubmit")
            .await
            .expect("fenced");
        let claimed = resubmit_claims::claim_due(&mut ftx, None, 7, Duration::from_secs(60))
            .await
            .expect("claim");
        ftx.commit().await.expect("commit");
        claimed.into_iter().map(|c| c.tx_id).collect::<Vec<_>>()
    };
    let mut claimed = Vec::new();
    loop {
        let (a, b) = tokio::join!(
            claim(lease.clone(), db.pool.clone()),
            claim(lease.clone(), db.pool.clone())
        );
        if a.is_empty() && b.is_empty() {
            break;
        }
        claimed.extend(a);
        claimed.extend(b);
    }
    let mut unique = claimed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), claimed.len(), "an intent was claimed twice");
    let mut expected = ids.clone();
    expected.sort_unstable();
    assert_eq!(unique, expected, "every due intent claimed exactly once");
    let resubmits: Vec<i32> = sqlx::query_scalar("SELECT resubmits FROM managed_tx")
        .fetch_all(&db.pool)
        .await
        .expect("resubmits");
    assert!(resubmits.iter().all(|r| *r == 1), "{resubmits:?}");

    // Another node takes the lease over: the old holder's claim is fenced.
    store::release(&db.pool, &lease).await.expect("release");
    store::acquire_or_renew(&db.pool, &request("u"))
        .await
        .expect("lease")
        .lease()
        .cloned()
        .expect("u leads");
    sqlx::query("UPDATE managed_tx SET next_resubmit_at = now() - interval '1 second'")
        .execute(&db.pool)
        .await
        .expect("make due");
    let stale = FencedTx::begin(&db.pool, &lease, "claim_resubmit").await;
    assert!(
        matches!(&stale, Err(e) if e.is_fenced()),
        "a stale holder must be fenced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_across_a_take_over_bump_once_per_due_time() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let interval_ms = 500;
    let extra = format!(
        "resubmit_interval = \"{interval_ms}ms\"\nmax_resubmits = 1000\ngas_bump = {{ enabled = true }}\n\
         finality = {{ confirmations = 1 }}"
    );
    let a = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "a", &extra)).await;
    let b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", &extra)).await;
    let tx_id = create_transfer(&a, "raced", 1).await;
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id).await.len() >= 3
    })
    .await;

    // Crash whichever node leads; the other takes over and carries on.
    let owner: String = sqlx::query_scalar("SELECT owner_node FROM submitter_lease")
        .fetch_one(&db.pool)
        .await
        .expect("lease");
    let (dead, survivor) = if owner == "a" { (a, b) } else { (b, a) };
    let before = attempts(&db.pool, tx_id).await.len();
    dead.kill();
    wait_until(WAIT, || async {
        attempts(&db.pool, tx_id).await.len() >= before + 3
    })
    .await;
    anvil.mine().await;
    wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    survivor.stop().await;

    let all = attempts(&db.pool, tx_id).await;
    for pair in all.windows(2) {
        let gap = pair[1].created_ms - pair[0].created_ms;
        // Each claim moves the due time on by the interval, so two attempts
        // are never closer than that (less the claim-to-insert latency).
        assert!(
            gap >= interval_ms - 150,
            "attempts {} and {} only {gap} ms apart: {all:?}",
            pair[0].attempt_no,
            pair[1].attempt_no
        );
        assert!(pair[1].max_fee * 10 >= pair[0].max_fee * 11);
    }
    let owners: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT fencing_token::text FROM tx_attempt WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_all(&db.pool)
            .await
            .expect("tokens");
    assert_eq!(owners.len(), 2, "attempts from both leaders: {owners:?}");
    invariants::check(&db.pool, &anvil, DEV_ADDRESS_0, 0).await;
}

/// Draws nonces for the rows `lock_queued` locked, assigns them, commits.
async fn allocate_locked(mut ftx: FencedTx, locked: &[uuid::Uuid]) {
    use txmgr_actors::store::{nonce_cursor, pipeline};
    let nonces = nonce_cursor::allocate(&mut ftx, locked.len())
        .await
        .expect("nonces");
    let pairs: Vec<_> = locked.iter().copied().zip(nonces).collect();
    pipeline::assign_nonces(&mut ftx, &pairs, std::time::Duration::from_secs(60))
        .await
        .expect("assign");
    ftx.commit().await.expect("commit");
}

/// Waits until some backend waits on a row lock.
async fn someone_waits_on_a_lock(db: &TestDb) {
    wait_until(WAIT, || async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
        )
        .fetch_one(&db.pool)
        .await
        .expect("pg_stat_activity");
        waiting > 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_cancel_racing_the_allocation_never_leaves_a_nonce_gap() {
    use txmgr_actors::{
        domain::{CreateOutcome, NewIntent},
        store::{
            actions::{self, ActionOutcome, Requester},
            intents, nonce_cursor, pipeline,
            resubmit_claims::OperatorAction,
        },
    };
    let db = TestDb::migrated().await;
    let submitter = SubmitterKey::new(31337, DEV_ADDRESS_0.parse().expect("address"));
    let queue = |names: &[&str]| {
        let intents: Vec<NewIntent> = names
            .iter()
            .map(|name| {
                NewIntent::new(
                    submitter,
                    Some((*name).to_owned()),
                    crate::common::txs::transfer_intent(1),
                )
            })
            .collect();
        let pool = db.pool.clone();
        async move {
            intents::insert_queued(&pool, &intents)
                .await
                .expect("queued")
                .into_iter()
                .map(|o| match o {
                    CreateOutcome::Created(s) => s.tx_id,
                    other => panic!("{other:?}"),
                })
                .collect::<Vec<_>>()
        }
    };
    let who = Requester {
        name: "ops",
        reason: None,
        node_id: "t",
    };
    let lease = store::acquire_or_renew(&db.pool, &request("t"))
        .await
        .expect("lease")
        .lease()
        .cloned()
        .expect("t leads");
    let mut ftx = FencedTx::begin(&db.pool, &lease, "init")
        .await
        .expect("fenced");
    nonce_cursor::init(&mut ftx, 0).await.expect("cursor");
    ftx.commit().await.expect("commit");

    // The cancel commits while the allocator is still pricing: skipped.
    let first = queue(&["a", "b", "c"]).await;
    let cancelled = actions::request(
        &db.pool,
        31337_u64.into(),
        first[1],
        OperatorAction::Cancel,
        &who,
    )
    .await
    .expect("cancel");
    assert_eq!(cancelled, ActionOutcome::Cancelled);
    let mut ftx = FencedTx::begin(&db.pool, &lease, "allocate")
        .await
        .expect("fenced");
    let locked = pipeline::lock_queued(&mut ftx, &first).await.expect("lock");
    assert_eq!(locked, [first[0], first[2]]);
    allocate_locked(ftx, &locked).await;

    // The cancel arrives after the allocator locked the rows: it waits, then
    // finds the intent ALLOCATED (no longer cancellable without a nonce).
    let second = queue(&["d", "e"]).await;
    let mut ftx = FencedTx::begin(&db.pool, &lease, "allocate")
        .await
        .expect("fenced");
    let locked = pipeline::lock_queued(&mut ftx, &second)
        .await
        .expect("lock");
    let late = {
        let pool = db.pool.clone();
        let id = second[0];
        tokio::spawn(async move {
            let who = Requester {
                name: "ops",
                reason: None,
                node_id: "t",
            };
            actions::request(&pool, 31337_u64.into(), id, OperatorAction::Cancel, &who).await
        })
    };
    someone_waits_on_a_lock(&db).await;
    allocate_locked(ftx, &locked).await;
    let outcome = late.await.expect("task").expect("request");
    assert!(
        matches!(outcome, ActionOutcome::NotAllowed { .. }),
        "{outcome:?}"
    );

    let nonces: Vec<i64> =
        sqlx::query_scalar("SELECT nonce FROM managed_tx WHERE nonce IS NOT NULL ORDER BY nonce")
            .fetch_all(&db.pool)
            .await
            .expect("nonces");
    assert_eq!(
        nonces,
        [0, 1, 2, 3],
        "contiguous: no nonce lost to a cancel"
    );
    let released: Vec<i64> =
        sqlx::query_scalar("SELECT unnest(released) FROM submitter_nonce_cursor")
            .fetch_all(&db.pool)
            .await
            .expect("released");
    assert!(released.is_empty(), "{released:?}");
}
