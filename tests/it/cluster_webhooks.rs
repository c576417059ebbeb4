//! Webhook delivery across real daemon processes (README "Webhooks"): the
//! node delivering for a webhook is SIGKILLed mid-burst; the other takes
//! the webhook's lease over and resumes from the durable cursor. Every
//! completion reaches the receiver, in order per submitter, and only events
//! that were in flight at the kill arrive twice.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use txmgr_actors::store::completions::FeedCursor;
use uuid::Uuid;

use crate::common::{
    cluster::{Cluster, ClusterSpec},
    receiver::Receiver,
    wait_until, Anvil,
};

const SECRET_VAR: &str = "TXMGR_CLUSTER_WEBHOOK_SECRET";

/// The node holding a live lease of the webhook `name`.
async fn holder(cluster: &Cluster, name: &str) -> Option<String> {
    sqlx::query_scalar(
        "SELECT owner_node FROM webhook_cursor WHERE webhook = $1 AND expires_at > now()",
    )
    .bind(name)
    .fetch_optional(&cluster.db.pool)
    .await
    .expect("webhook lease")
}

/// Two dev submitters, no node yet, balancing on (webhooks move to their
/// preferred node after 3 s), blocks every 200 ms.
async fn balancing_cluster() -> Cluster {
    let spec = ClusterSpec {
        nodes: vec![],
        submitters: vec![0, 1],
        strict: vec![],
        node_extra: "rebalance = true\nrebalance_settle = \"2s\"\nrebalance_min_hold = \"3s\"\nhandover_grace = \"1s\"",
        confirmations: 2,
    };
    Cluster::start(
        spec,
        Anvil::start_with(&["--block-time", "0.2"]).await,
        None,
    )
    .await
}

/// A `[[webhooks]]` entry `name` for CONFIRMED events to `url`, from the
/// feed's beginning, with short backoffs.
fn hook_toml(name: &str, url: &str) -> String {
    format!(
        "\n[[webhooks]]\nname = \"{name}\"\nurl = \"{url}\"\nsecret_env = \"{SECRET_VAR}\"\n\
         events = [\"CONFIRMED\"]\nstart_at = \"beginning\"\nbackoff_initial = \"100ms\"\nbackoff_max = \"500ms\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_delivering_node_killed_mid_burst_hands_over_and_nothing_is_lost() {
    std::env::set_var(SECRET_VAR, "cluster-secret");
    let receiver = Receiver::always_ok().await;
    // A slow receiver: deliveries are in flight when the kill comes.
    receiver.set_delay(Duration::from_millis(20));
    let mut cluster = balancing_cluster().await;
    let hook = hook_toml("hook", &receiver.url);
    for node in ["n1", "n2"] {
        let hook = hook.clone();
        cluster
            .add_node_with(node, move |config| config + &hook)
            .await;
    }
    let load = cluster.load(160, 40, 7);
    wait_until(Duration::from_secs(60), || async {
        receiver.delivered().len() >= 30
    })
    .await;
    // Balancing may be handing the webhook over right now: wait for a holder.
    wait_until(Duration::from_secs(10), || async {
        holder(&cluster, "hook").await.is_some()
    })
    .await;
    let victim = holder(&cluster, "hook").await.expect("a node delivers");
    cluster.node(&victim).kill().await;
    // The survivor takes the webhook over within the fail-over bound.
    wait_until(Duration::from_secs(10), || async {
        holder(&cluster, "hook").await.is_some_and(|n| n != victim)
    })
    .await;
    let acked = load.finish().await;
    cluster.verify(&acked).await;

    // Every CONFIRMED completion arrives.
    let expected: HashSet<Uuid> = acked.iter().map(|a| a.tx_id).collect();
    wait_until(Duration::from_secs(60), || async {
        let got: HashSet<Uuid> = receiver
            .delivered()
            .iter()
            .filter_map(|r| r.json["tx_id"].as_str()?.parse().ok())
            .collect();
        got == expected
    })
    .await;
    let delivered = receiver.delivered();
    let mut times: HashMap<String, usize> = HashMap::new();
    for r in &delivered {
        *times.entry(r.delivery_id.clone()).or_default() += 1;
    }
    let twice: Vec<&String> = times
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| id)
        .collect();
    // At most one event per submitter is in flight at a time.
    assert!(
        twice.len() <= cluster.submitters.len(),
        "only in-flight events may repeat: {twice:?}"
    );
    assert!(times.values().all(|n| *n <= 2), "{times:?}");
    // In feed order per submitter (first arrival of each event).
    let mut seen = HashSet::new();
    let mut last: HashMap<String, FeedCursor> = HashMap::new();
    for r in &delivered {
        if !seen.insert(r.delivery_id.clone()) {
            continue;
        }
        let submitter = r.json["submitter"].as_str().expect("submitter").to_owned();
        let cursor = FeedCursor::parse(r.json["cursor"].as_str().expect("cursor")).expect("token");
        if let Some(previous) = last.insert(submitter.clone(), cursor) {
            assert!(previous < cursor, "{submitter}: {previous} then {cursor}");
        }
    }
}

/// A webhook name whose preferred node (rendezvous by name) is `to` rather
/// than `from`, as the membership ranks them.
fn name_preferring(to: &str, from: &str) -> String {
    use alloy::primitives::keccak256;
    let rank = |node: &str, name: &str| keccak256(format!("{node}/{name}")).0;
    (0..)
        .map(|i| format!("hook-{i}"))
        .find(|name| rank(to, name) > rank(from, name))
        .expect("some name prefers either node")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_voluntary_hand_over_waits_for_running_attempts_and_repeats_nothing() {
    std::env::set_var(SECRET_VAR, "cluster-secret");
    let receiver = Receiver::always_ok().await;
    // Slow answers: when the preferred node appears, attempts are running.
    receiver.set_delay(Duration::from_millis(300));
    let mut cluster = balancing_cluster().await;
    let name = name_preferring("n2", "n1");
    let hook = hook_toml(&name, &receiver.url);
    let first = hook.clone();
    cluster
        .add_node_with("n1", move |config| config + &first)
        .await;
    let load = cluster.load(120, 20, 11);
    wait_until(Duration::from_secs(60), || async {
        receiver.received().len() >= 10
    })
    .await;
    assert_eq!(holder(&cluster, &name).await.as_deref(), Some("n1"));
    cluster
        .add_node_with("n2", move |config| config + &hook)
        .await;
    // n1 hands the webhook to its preferred node while deliveries run.
    wait_until(Duration::from_secs(30), || async {
        holder(&cluster, &name).await.as_deref() == Some("n2")
    })
    .await;
    let acked = load.finish().await;
    cluster.verify(&acked).await;
    let expected: HashSet<Uuid> = acked.iter().map(|a| a.tx_id).collect();
    wait_until(Duration::from_secs(60), || async {
        let got: HashSet<Uuid> = receiver
            .delivered()
            .iter()
            .filter_map(|r| r.json["tx_id"].as_str()?.parse().ok())
            .collect();
        got == expected
    })
    .await;
    let mut times: HashMap<String, usize> = HashMap::new();
    for r in receiver.received() {
        *times.entry(r.delivery_id).or_default() += 1;
    }
    let twice: Vec<(&String, &usize)> = times.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "a hand-over without a crash sends nothing twice: {twice:?}"
    );
}
