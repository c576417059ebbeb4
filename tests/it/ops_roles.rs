//! `GET /v1/ops/actors` on a two-node cluster (README "How an intent is executed" and "HTTP API"):
//! one node leads the submitter with a fencing token, the other stands by;
//! and the leader's mailbox/ingress depth rises under a burst of creates.

use std::{
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use crate::common::{
    faulty_chain::{FaultyChain, SendFault},
    invariants,
    node::{config_toml, TestNode},
    transfer, wait_until, Anvil, TestDb, DEV,
};
use serde_json::Value;
use txmgr_actors::chain::ChainClient;

/// The actor row of DEV in `GET /v1/ops/actors` of `node`.
async fn dev_row(node: &TestNode) -> Value {
    let (status, body) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{body}");
    body["submitters"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["submitter"] == DEV).cloned())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_show_one_leader_with_a_token_and_one_standby() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let a = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "a", "")).await;
    let b = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "b", "")).await;

    let (status, body) = a
        .request("POST", "/v1/transactions", Some(transfer("via-a")))
        .await;
    assert_eq!(status, 202, "{body}");
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    let (status, body) = b
        .request("POST", "/v1/transactions", Some(transfer("via-b")))
        .await;
    assert_eq!(status, 202, "{body}");
    invariants::wait_mined(&db.pool, 2, Duration::from_secs(30)).await;

    // Both nodes run an actor for DEV: exactly one leads, the other stands by.
    let mut last = (Value::Null, Value::Null);
    let settled = async {
        for _ in 0..150 {
            let rows = (dev_row(&a).await, dev_row(&b).await);
            let roles = (rows.0["role"].clone(), rows.1["role"].clone());
            last = rows;
            if (roles.0 == "leader" && roles.1 == "standby")
                || (roles.0 == "standby" && roles.1 == "leader")
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
    .await;
    assert!(
        settled,
        "want one leader and one standby:\na: {}\nb: {}",
        last.0, last.1
    );
    let (leader, standby, leader_id) = if last.0["role"] == "leader" {
        (&last.0, &last.1, "a")
    } else {
        (&last.1, &last.0, "b")
    };
    let token = leader["fencing_token"].as_i64().unwrap_or(0);
    assert!(token >= 1, "leader has a fencing token: {leader}");
    assert!(
        leader["lease_time_left_ms"].as_u64().unwrap_or(0) > 0,
        "{leader}"
    );
    assert_eq!(
        standby["fencing_token"], 0,
        "standby holds no lease: {standby}"
    );

    // The gauges' counts (`Engine::load`, read without the snapshot) agree
    // with the snapshot on each node.
    for node in [&a, &b] {
        let load = node.engine.load();
        let snapshot = node.engine.snapshot();
        for sub in &snapshot.submitters {
            let role = sub.role.as_str();
            let want = snapshot
                .submitters
                .iter()
                .filter(|s| s.role.as_str() == role)
                .count();
            assert_eq!(load.roles.get(role).copied(), Some(want), "{load:?}");
        }
        assert_eq!(
            load.roles.values().sum::<usize>(),
            snapshot.submitters.len()
        );
    }

    // The database agrees with the view.
    let (owner, db_token): (String, i64) =
        sqlx::query_as("SELECT owner_node, fencing_token FROM submitter_lease")
            .fetch_one(&db.pool)
            .await
            .expect("lease row");
    assert_eq!(owner, leader_id);
    assert_eq!(db_token, token);
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mailbox_depth_rises_under_a_burst_while_the_actor_is_parked() {
    const BURST: usize = 200;
    let db = TestDb::migrated().await;
    // Interval mining: anvil's automine can strand a burst of same-sender
    // transactions in its queue (a pool race of anvil's, seen here under CPU
    // load: the burst then never mines), see tests/pipeline.rs.
    let anvil = Anvil::start_with(&["--block-time", "1"]).await;
    let mut faulty = None;
    let toml = config_toml(&db.url, &anvil.rpc_url(), "a", "max_in_flight = 256");
    let node = TestNode::start_with(&toml, |chain| {
        let wrapped = FaultyChain::new(chain, SendFault::Gated);
        faulty = Some(wrapped.clone());
        wrapped as Arc<dyn ChainClient>
    })
    .await;
    let node = Arc::new(node);
    let faulty = faulty.expect("wrapped");

    // Park the leader inside its first broadcast.
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(transfer("park")))
        .await;
    assert_eq!(status, 202, "{body}");
    wait_until(Duration::from_secs(30), || async {
        faulty.sends.load(Ordering::SeqCst) > 0
    })
    .await;

    // The burst: creates run concurrently while the actor cannot take them.
    let burst: Vec<_> = (0..BURST)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move {
                node.request("POST", "/v1/transactions", Some(transfer(&format!("b{i}"))))
                    .await
            })
        })
        .collect();
    let mut peak = (0u64, 0u64);
    let mut seen = Value::Null;
    for _ in 0..300 {
        let row = dev_row(&node).await;
        let mailbox = row["mailbox_depth"].as_u64().unwrap_or(0);
        let ingress = row["ingress_depth"].as_u64().unwrap_or(0);
        peak = (peak.0.max(mailbox), peak.1.max(ingress));
        if mailbox > 0 || ingress > 0 {
            seen = row;
            break;
        }
        if burst.iter().all(|h| h.is_finished()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        peak.0 > 0 || peak.1 > 0,
        "neither mailbox_depth nor ingress_depth rose above 0 under a burst of {BURST}"
    );
    assert_eq!(seen["role"], "leader", "{seen}");

    faulty.open_gate();
    let mut accepted = 1;
    for handle in burst {
        let (status, body) = handle.await.expect("create task");
        match status {
            202 => accepted += 1,
            429 => assert_eq!(body["error"]["code"], "overloaded", "{body}"),
            other => panic!("create answered {other}: {body}"),
        }
    }
    println!("peak mailbox/ingress depth {peak:?}; accepted {accepted}: {seen}");
    invariants::wait_mined(&db.pool, accepted, Duration::from_secs(60)).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM managed_tx")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(rows, accepted, "every accepted create is one row");
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let node = Arc::into_inner(node).expect("tasks done");
    node.stop().await;
}
