//! Several in-process nodes on one database: any node accepts, one leader
//! allocates, and a stale leader is fenced out.

use std::{sync::Arc, time::Duration};

use crate::common::{
    faulty_chain::{FaultyChain, SendFault},
    invariants,
    node::{config_toml, TestNode},
    transfer, wait_until, Anvil, TestDb, DEV,
};
use txmgr_actors::{chain::ChainClient, submitter::Role};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_creates_across_four_nodes_get_unique_contiguous_nonces() {
    let db = TestDb::migrated().await;
    // Interval mining: anvil's automine can strand a burst of same-sender
    // transactions in its queue (a pool race of anvil's, not a chain rule).
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let mut nodes = Vec::new();
    for id in ["n1", "n2", "n3", "n4"] {
        nodes.push(
            TestNode::start(&config_toml(
                &db.url,
                &anvil.rpc_url(),
                id,
                "max_in_flight = 256",
            ))
            .await,
        );
    }
    let creates = (0..1000).map(|i| {
        let node = &nodes[i % nodes.len()];
        async move {
            node.request("POST", "/v1/transactions", Some(transfer(&format!("m{i}"))))
                .await
        }
    });
    let answers = futures::future::join_all(creates).await;
    for (status, body) in &answers {
        assert_eq!(*status, 202, "{body}");
    }
    invariants::wait_mined(&db.pool, 1000, Duration::from_secs(180)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let leaders = nodes
        .iter()
        .filter(|n| {
            n.engine
                .handles()
                .iter()
                .any(|h| h.status().role() == Role::Leader)
        })
        .count();
    assert_eq!(leaders, 1, "exactly one node leads the submitter");
    for node in nodes {
        node.stop().await;
    }
}

/// Node a is parked inside a broadcast while its lease is expired in the
/// database and node b takes over. When a wakes, its fenced write is refused,
/// its actor stops and comes back as standby; nothing is duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_leader_is_fenced_and_restarts_as_standby() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let faulty = std::sync::Mutex::new(None);
    let node_a = TestNode::start_with(&config_toml(&db.url, &anvil.rpc_url(), "a", ""), |chain| {
        let wrapped = FaultyChain::new(chain, SendFault::Gated);
        *faulty.lock().expect("lock") = Some(wrapped.clone());
        wrapped as Arc<dyn ChainClient>
    })
    .await;
    let faulty = faulty.lock().expect("lock").take().expect("wrapped");
    let (status, _) = node_a
        .request("POST", "/v1/transactions", Some(transfer("first")))
        .await;
    assert_eq!(status, 202);
    wait_until(Duration::from_secs(30), || async {
        faulty.sends.load(std::sync::atomic::Ordering::SeqCst) >= 1
    })
    .await;
    let handle_a = node_a.engine.handles().pop().expect("a has the handle");
    assert_eq!(handle_a.status().fencing_token(), 1);

    // a's lease runs out while it is parked; b takes over on its next create.
    sqlx::query("UPDATE submitter_lease SET expires_at = now() - interval '1 minute'")
        .execute(&db.pool)
        .await
        .expect("expire");
    let node_b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", "")).await;
    let (status, _) = node_b
        .request("POST", "/v1/transactions", Some(transfer("second")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 2, Duration::from_secs(30)).await;

    // a wakes up: its broadcast goes out (identical bytes, harmless), its
    // fenced record is refused, the actor stops and restarts as standby.
    faulty.open_gate();
    wait_until(Duration::from_secs(30), || async {
        handle_a.status().restarts() >= 1 && handle_a.status().role() == Role::Standby
    })
    .await;
    let fenced: i64 = sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE fencing_token = 1 AND state <> 'QUEUED' AND receipt IS NOT NULL")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(
        fenced, 0,
        "receipts are recorded by the new leader (token 2), not by a"
    );

    // Creates on the stale node still work: b allocates them.
    let (status, _) = node_a
        .request("POST", "/v1/transactions", Some(transfer("third")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 3, Duration::from_secs(30)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let (owner, token): (String, i64) =
        sqlx::query_as("SELECT owner_node, fencing_token FROM submitter_lease")
            .fetch_one(&db.pool)
            .await
            .expect("lease");
    assert_eq!((owner.as_str(), token), ("b", 2));
    node_b.stop().await;
    node_a.stop().await;
}
