//! The fault-injection suite (the promises under faults: README "Data model and
//! leases" and "Running several nodes"; issue 7): real
//! daemon processes on one database and one anvil, continuous creates to
//! random nodes, and a fault per scenario — SIGKILL of a leader, SIGSTOP past
//! the lease, killed database connections, a faulty RPC path, dropped and
//! reorged transactions. Each scenario ends with the invariant checks of
//! `Cluster::verify`: no acknowledged create lost, no nonce used twice, each
//! intent on chain once, nonces gap-free, everything CONFIRMED.

use std::time::Duration;

use crate::common::{
    cluster::{Cluster, ClusterSpec},
    rpc_proxy::{Faults, RpcProxy},
    wait_until, Anvil,
};
use serde_json::json;

/// Submitters 0, 1, 2; 2 runs in strict mode.
fn three_nodes() -> ClusterSpec {
    ClusterSpec {
        nodes: vec!["n1", "n2", "n3"],
        submitters: vec![0, 1, 2],
        strict: vec![2],
        // Balancing on (the default), fast: leases move while faults hit.
        node_extra: "rebalance = true\nrebalance_settle = \"2s\"\nrebalance_min_hold = \"3s\"\nhandover_grace = \"1s\"",
        confirmations: 2,
    }
}

async fn mining_anvil() -> Anvil {
    Anvil::start_with(&["--block-time", "0.2"]).await
}

/// Waits until `n` creates are acknowledged.
async fn acked_at_least(load: &crate::common::cluster::Load, n: usize) {
    wait_until(Duration::from_secs(60), || async { load.acked() >= n }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_killed_mid_burst_loses_nothing_and_its_restart_rejoins() {
    let mut cluster = Cluster::start(three_nodes(), mining_anvil().await, None).await;
    let load = cluster.load(150, 40, 1);
    acked_at_least(&load, 40).await;
    let strict = cluster.submitters[2].clone();
    let victim = wait_for_leader(&cluster, &strict).await;
    cluster.node(&victim).kill().await;
    // A survivor takes the strict submitter over within the fail-over bound.
    wait_until(Duration::from_secs(10), || async {
        cluster
            .leader_of(&strict)
            .await
            .is_some_and(|owner| owner != victim)
    })
    .await;
    acked_at_least(&load, 100).await;
    let node = cluster.node(&victim);
    node.restart();
    let client = cluster.client.clone();
    cluster.node(&victim).ready(&client).await;
    let acked = load.finish().await;
    cluster.verify(&acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_frozen_past_its_lease_is_fenced_and_ends_standby() {
    let mut cluster = Cluster::start(three_nodes(), mining_anvil().await, None).await;
    let load = cluster.load(120, 40, 2);
    acked_at_least(&load, 30).await;
    let submitter = cluster.submitters[0].clone();
    let frozen = wait_for_leader(&cluster, &submitter).await;
    cluster.node(&frozen).freeze();
    wait_until(Duration::from_secs(15), || async {
        cluster
            .leader_of(&submitter)
            .await
            .is_some_and(|owner| owner != frozen)
    })
    .await;
    acked_at_least(&load, 80).await;
    cluster.node(&frozen).thaw();
    // Its stale lease is fenced: the actor stops and comes back as standby.
    let client = cluster.client.clone();
    wait_until(Duration::from_secs(20), || async {
        let Some(view) = cluster.node_ref(&frozen).actors(&client).await else {
            return false;
        };
        view["submitters"].as_array().is_some_and(|rows| {
            rows.iter()
                .any(|r| r["submitter"] == submitter.as_str() && r["role"] == "standby")
        })
    })
    .await;
    let acked = load.finish().await;
    cluster.verify(&acked).await;
}

/// A leader frozen (SIGSTOP) while its remote signer stalls holds no lock
/// and no open transaction: a standby takes over within the fail-over bound
/// and the completion feed keeps serving everything committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_frozen_while_its_remote_signer_stalls_is_replaced_and_the_feed_keeps_serving() {
    let anvil = mining_anvil().await;
    // anvil signs for its dev accounts (`eth_signTransaction`): behind a
    // proxy, it is a remote signer we can stall.
    let signer = RpcProxy::start(&anvil.rpc_url(), 21).await;
    let spec = ClusterSpec {
        submitters: vec![0],
        strict: vec![],
        ..three_nodes()
    };
    let mut cluster = Cluster::start_signed_by(spec, anvil, signer.url()).await;
    let load = cluster.load(100, 40, 5);
    acked_at_least(&load, 20).await;
    let submitter = cluster.submitters[0].clone();
    let frozen = wait_for_leader(&cluster, &submitter).await;
    let stalled_before = signer.counts().delayed;
    signer.set(Faults {
        stall: Some(Duration::from_millis(1500)),
        ..Faults::default()
    });
    // The only leader is now waiting on its signer: freeze it there.
    wait_until(Duration::from_secs(10), || async {
        signer.counts().delayed > stalled_before
    })
    .await;
    cluster.node(&frozen).freeze();
    // Signing happens outside any fenced transaction: the frozen node holds
    // no lock on the lease row (one would block the take-over until the
    // server ended the session).
    let open: Vec<String> = sqlx::query_scalar(
        "SELECT a.query FROM pg_stat_activity a
           JOIN pg_locks l ON l.pid = a.pid
           JOIN pg_class c ON c.oid = l.relation
          WHERE a.application_name = $1 AND c.relname = 'submitter_lease'
            AND a.state LIKE 'idle in transaction%'",
    )
    .bind(format!("txmgr-{frozen}"))
    .fetch_all(&cluster.db.pool)
    .await
    .expect("activity");
    assert!(
        open.is_empty(),
        "the frozen leader holds the lease row locked: {open:?}"
    );
    signer.set(Faults::default());
    wait_until(Duration::from_secs(10), || async {
        cluster
            .leader_of(&submitter)
            .await
            .is_some_and(|owner| owner != frozen)
    })
    .await;
    acked_at_least(&load, 70).await;

    // Everything committed so far is served by a live node's feed while the
    // frozen node is still stopped.
    let committed: i64 = crate::common::eventually(
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM tx_completion")
                .fetch_one(&cluster.db.pool)
                .await
                .expect("count");
            (n >= 10).then_some(n)
        },
    )
    .await;
    let live = ["n1", "n2", "n3"]
        .into_iter()
        .find(|n| *n != frozen)
        .expect("a live node");
    let base = cluster.node_ref(live).base();
    let client = cluster.client.clone();
    let served = std::sync::atomic::AtomicI64::new(0);
    let after = std::sync::Mutex::new(None::<String>);
    wait_until(Duration::from_secs(15), || async {
        let cursor = after.lock().expect("cursor").clone();
        let url = match cursor {
            Some(c) => format!("{base}/v1/completions?limit=1000&after={c}"),
            None => format!("{base}/v1/completions?limit=1000"),
        };
        let Ok(response) = client.get(url).send().await else {
            return false;
        };
        let Ok(page) = response.json::<serde_json::Value>().await else {
            return false;
        };
        let items = page["items"].as_array().map_or(0, Vec::len);
        let total = served.fetch_add(
            i64::try_from(items).unwrap_or(0),
            std::sync::atomic::Ordering::SeqCst,
        ) + i64::try_from(items).unwrap_or(0);
        if let Some(next) = page["next_after"].as_str() {
            *after.lock().expect("cursor") = Some(next.to_owned());
        }
        total >= committed
    })
    .await;

    cluster.node(&frozen).thaw();
    let acked = load.finish().await;
    cluster.verify(&acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_database_connections_are_killed_recovers_on_its_own() {
    let mut cluster = Cluster::start(three_nodes(), mining_anvil().await, None).await;
    let load = cluster.load(120, 40, 3);
    acked_at_least(&load, 20).await;
    let victim = "n2";
    for round in 0..3 {
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(format!("txmgr-{victim}"))
        .fetch_all(&cluster.db.pool)
        .await
        .expect("terminate");
        assert!(
            !killed.is_empty(),
            "round {round}: no connection of {victim} found"
        );
        acked_at_least(&load, 20 + 30 * (round + 1)).await;
    }
    // The node serves creates again by itself.
    let base = cluster.node(victim).base();
    let client = cluster.client.clone();
    wait_until(Duration::from_secs(30), || async {
        client
            .post(format!("{base}/v1/transactions"))
            .json(&json!({
                "submitter": cluster.submitters[0],
                "request_id": "after-recovery",
                "to": crate::common::cluster::SINK,
                "value": "1",
            }))
            .send()
            .await
            .is_ok_and(|r| matches!(r.status().as_u16(), 200 | 202))
    })
    .await;
    let mut acked = load.finish().await;
    let tx_id =
        sqlx::query_scalar("SELECT tx_id FROM managed_tx WHERE request_id = 'after-recovery'")
            .fetch_one(&cluster.db.pool)
            .await
            .expect("created after recovery");
    acked.push(crate::common::cluster::Acked {
        request_id: "after-recovery".into(),
        tx_id,
    });
    cluster.verify(&acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_faulty_rpc_path_with_dropped_answers_duplicates_nothing() {
    let anvil = mining_anvil().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 7).await;
    let cluster = Cluster::start(three_nodes(), anvil, Some(proxy.url())).await;
    proxy.set(Faults {
        delay_rate: 0.2,
        max_delay: Duration::from_millis(300),
        error_rate: 0.05,
        reset_rate: 0.05,
        drop_after_forward_rate: 0.03,
        send_drop_rate: 0.3,
        ..Faults::default()
    });
    let load = cluster.load(90, 30, 4);
    let acked = load.finish().await;
    let counts = proxy.counts();
    assert!(
        counts.dropped_sends > 0 && counts.resets > 0 && counts.errors > 0,
        "{counts:?}"
    );
    cluster.verify(&acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dropped_and_reorged_transactions_during_a_burst_still_confirm_once() {
    // Reorgs of depth 2 stay below finality (4 confirmations): a CONFIRMED
    // intent is never reorged out (that is logged and counted, not undone).
    let spec = ClusterSpec {
        confirmations: 4,
        ..three_nodes()
    };
    let cluster = Cluster::start(spec, mining_anvil().await, None).await;
    let load = cluster.load(150, 40, 5);
    let mut dropped = 0;
    let mut reorgs = 0;
    while load.acked() < 140 {
        // Drop whatever waits in the pool, then reorg the last blocks.
        let pool = cluster.anvil.rpc("txpool_content", json!([])).await;
        if let Some(senders) = pool["pending"].as_object() {
            for txs in senders.values().filter_map(|v| v.as_object()) {
                for tx in txs.values() {
                    if let Some(hash) = tx["hash"].as_str() {
                        cluster
                            .anvil
                            .rpc("anvil_dropTransaction", json!([hash]))
                            .await;
                        dropped += 1;
                    }
                }
            }
        }
        if cluster.anvil.block_number().await > 10 {
            cluster.anvil.rpc("anvil_reorg", json!([2, []])).await;
            reorgs += 1;
        }
        let before = load.acked();
        wait_until(Duration::from_secs(30), || async {
            load.acked() >= before + 20 || load.acked() >= 140
        })
        .await;
    }
    assert!(
        dropped > 0 && reorgs > 0,
        "dropped {dropped}, reorgs {reorgs}"
    );
    let acked = load.finish().await;
    cluster.verify(&acked).await;
}

/// The node holding `submitter`'s lease, once someone does.
async fn wait_for_leader(cluster: &Cluster, submitter: &str) -> String {
    crate::common::eventually(Duration::from_secs(30), Duration::from_millis(100), || {
        cluster.leader_of(submitter)
    })
    .await
}
