//! Lease balancing with real daemon processes (issue 7, scenario 6): leases
//! spread within one of even over the live nodes, a joining node takes its
//! share, a leaving node's share moves to the others — while creates keep
//! flowing to every node, nothing stalls beyond the fail-over bound, and the
//! invariants hold.

use std::{collections::HashMap, time::Duration};

use crate::common::{
    cluster::{Cluster, ClusterSpec},
    wait_until, Anvil,
};

/// Fail-over bound of the test cluster's lease timing (duration + renew).
const FAIL_OVER: Duration = Duration::from_secs(4);

fn within_one_of_even(leases: &HashMap<String, usize>, nodes: &[&str], total: usize) -> bool {
    let counts: Vec<usize> = nodes
        .iter()
        .map(|n| leases.get(*n).copied().unwrap_or(0))
        .collect();
    let held: usize = leases.values().sum();
    let (min, max) = (counts.iter().min(), counts.iter().max());
    held == total && max.zip(min).is_some_and(|(max, min)| max - min <= 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_spread_evenly_and_follow_nodes_joining_and_leaving() {
    let spec = ClusterSpec {
        nodes: vec!["n1", "n2"],
        submitters: vec![0, 1, 2, 3, 4, 5],
        strict: vec![],
        node_extra: "rebalance = true\nrebalance_settle = \"2s\"\nrebalance_min_hold = \"2s\"\nhandover_grace = \"1s\"",
        confirmations: 2,
    };
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let mut cluster = Cluster::start(spec, anvil, None).await;
    let load = cluster.load(360, 30, 6);
    let total = cluster.submitters.len();

    wait_until(Duration::from_secs(30), || async {
        within_one_of_even(&cluster.leases_per_node().await, &["n1", "n2"], total)
    })
    .await;

    cluster.add_node("n3").await;
    wait_until(Duration::from_secs(30), || async {
        within_one_of_even(&cluster.leases_per_node().await, &["n1", "n2", "n3"], total)
    })
    .await;

    cluster.node("n1").stop().await;
    if let Ok(mut bases) = cluster.bases.write() {
        bases.retain(|b| !b.ends_with(&format!(":{}", cluster.daemons[0].port)));
    }
    wait_until(Duration::from_secs(30), || async {
        within_one_of_even(&cluster.leases_per_node().await, &["n2", "n3"], total)
    })
    .await;

    let acked = load.finish().await;
    cluster.verify(&acked).await;
    // No intent waited much longer than one fail-over plus its own
    // confirmation (two 200 ms blocks) and scheduling slack.
    let slowest: f64 = sqlx::query_scalar(
        "SELECT max(EXTRACT(EPOCH FROM (confirmed_at - created_at)))::float8 FROM managed_tx",
    )
    .fetch_one(&cluster.db.pool)
    .await
    .expect("latency");
    let bound = FAIL_OVER + Duration::from_secs(4);
    assert!(
        slowest <= bound.as_secs_f64(),
        "slowest intent took {slowest:.1} s (bound {bound:?})"
    );
}
