//! One lease owner per process (issue 12 item 8), with real daemon
//! processes: a second process with the `node_id` of a live node refuses to
//! start and leaves the first one's leases alone; a process restarted with
//! the same `node_id` after a crash starts and takes the leases over with a
//! new fencing token, so the crashed one's token is fenced.

use std::time::Duration;

use crate::common::{
    cluster::{Cluster, ClusterSpec, LEASE, SINK},
    eventually, Anvil,
};
use serde_json::json;
use uuid::Uuid;

/// A cluster without nodes yet (each test starts its own) over the dev
/// accounts `submitters`.
async fn cluster(submitters: Vec<usize>) -> Cluster {
    let spec = ClusterSpec {
        nodes: vec![],
        submitters,
        strict: vec![],
        node_extra: "",
        confirmations: 1,
    };
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    Cluster::start(spec, anvil, None).await
}

/// Sends a transfer of `submitter` to `base` and waits until it is CONFIRMED.
async fn create_confirmed(
    cluster: &Cluster,
    base: &str,
    submitter: &str,
    request_id: &str,
) -> Uuid {
    let body = json!({"submitter": submitter, "request_id": request_id, "to": SINK, "value": "1"});
    let url = format!("{base}/v1/transactions");
    let tx_id = eventually(Duration::from_secs(30), Duration::from_millis(200), || {
        let request = cluster.client.post(&url).json(&body).send();
        async move {
            let answer: serde_json::Value = request.await.ok()?.json().await.ok()?;
            answer["tx_id"].as_str()?.parse::<Uuid>().ok()
        }
    })
    .await;
    eventually(
        Duration::from_secs(60),
        Duration::from_millis(100),
        || async {
            let state: String = sqlx::query_scalar("SELECT state FROM managed_tx WHERE tx_id = $1")
                .bind(tx_id)
                .fetch_one(&cluster.db.pool)
                .await
                .expect("intent");
            (state == "CONFIRMED").then_some(())
        },
    )
    .await;
    tx_id
}

/// Every lease: submitter, owner node, fencing token, live.
async fn leases(cluster: &Cluster) -> Vec<(String, String, i64, bool)> {
    sqlx::query_as(
        "SELECT submitter, owner_node, fencing_token, expires_at > now()
           FROM submitter_lease ORDER BY submitter",
    )
    .fetch_all(&cluster.db.pool)
    .await
    .expect("leases")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_process_with_the_node_id_of_a_live_node_refuses_to_start() {
    let mut cluster = cluster(vec![0, 1]).await;
    cluster.add_node("n1").await;
    let base = cluster.node_ref("n1").base();
    for (i, submitter) in cluster.submitters.iter().enumerate() {
        create_confirmed(&cluster, &base, submitter, &format!("before-{i}")).await;
    }
    let held = leases(&cluster).await;
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(held.iter().all(|l| l.1 == "n1" && l.3), "{held:?}");

    let mut twin = cluster.spawn_node_with("n1", |config| config).await;
    let Some(status) = twin.exited_within(Duration::from_secs(30)).await else {
        panic!(
            "a second process with node_id n1 kept running:\n{}",
            twin.log()
        );
    };
    let log = twin.log();
    assert!(!status.success(), "{status}\n{log}");
    assert!(
        log.contains("node_id \"n1\" is in use by a live process"),
        "the refusal names the node id and the cause:\n{log}"
    );

    // The first process kept every lease with its token, and it alone
    // serves: new intents go through it under the same tokens.
    let after = leases(&cluster).await;
    assert_eq!(after, held, "the leases did not move");
    for (i, submitter) in cluster.submitters.iter().enumerate() {
        let tx_id = create_confirmed(&cluster, &base, submitter, &format!("after-{i}")).await;
        let tokens: Vec<i64> =
            sqlx::query_scalar("SELECT DISTINCT fencing_token FROM tx_attempt WHERE tx_id = $1")
                .bind(tx_id)
                .fetch_all(&cluster.db.pool)
                .await
                .expect("attempts");
        let token = held.iter().find(|l| &l.0 == submitter).map(|l| l.2);
        assert_eq!(tokens.first().copied(), token, "{tokens:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_after_sigkill_takes_over_with_a_new_fencing_token() {
    let mut cluster = cluster(vec![0]).await;
    // A lease that outlives the restart: the restarted process must not
    // simply renew what the killed one held.
    let long_lease = |config: String| {
        config.replace(
            LEASE,
            "duration = \"10s\"\nrenew_interval = \"1s\"\nclock_skew_allowance = \"500ms\"",
        )
    };
    cluster.add_node_with("n1", long_lease).await;
    let base = cluster.node_ref("n1").base();
    let submitter = cluster.submitters[0].clone();
    create_confirmed(&cluster, &base, &submitter, "before").await;
    let before = leases(&cluster).await;
    assert!(
        matches!(before.as_slice(), [(_, owner, _, true)] if owner == "n1"),
        "{before:?}"
    );
    let old_token = before[0].2;

    cluster.node("n1").kill().await;
    cluster.node("n1").restart();
    let client = cluster.client.clone();
    cluster.node_ref("n1").ready(&client).await;
    let tx_id = create_confirmed(&cluster, &base, &submitter, "after").await;

    let after = leases(&cluster).await;
    assert!(
        matches!(after.as_slice(), [(_, owner, _, true)] if owner == "n1"),
        "{after:?}"
    );
    assert!(
        after[0].2 > old_token,
        "the restarted process must lead with a new token, not the killed one's {old_token}: {after:?}"
    );
    let tokens: Vec<i64> =
        sqlx::query_scalar("SELECT DISTINCT fencing_token FROM tx_attempt WHERE tx_id = $1")
            .bind(tx_id)
            .fetch_all(&cluster.db.pool)
            .await
            .expect("attempts");
    assert_eq!(tokens, vec![after[0].2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_process_whose_node_id_was_taken_over_stops_when_it_thaws() {
    let mut cluster = cluster(vec![0]).await;
    cluster.add_node("n1").await;
    let submitter = cluster.submitters[0].clone();
    let first_base = cluster.node_ref("n1").base();
    create_confirmed(&cluster, &first_base, &submitter, "before").await;
    let old_token = leases(&cluster).await[0].2;

    // Frozen past the liveness window, the first process looks dead: a new
    // process with its node id starts and takes its lease over.
    cluster.node("n1").freeze();
    let successor = cluster.spawn_node_with("n1", |config| config).await;
    successor.ready(&cluster.client).await;
    create_confirmed(&cluster, &successor.base(), &submitter, "during").await;
    let taken = leases(&cluster).await;
    assert!(taken[0].2 > old_token, "{taken:?}");

    // Thawed, the first process finds its node id taken and stops.
    cluster.node("n1").thaw();
    let first = cluster.node("n1");
    let Some(status) = first.exited_within(Duration::from_secs(30)).await else {
        panic!("the superseded process kept running:\n{}", first.log());
    };
    let log = first.log();
    assert!(!status.success(), "{status}\n{log}");
    assert!(
        log.contains("registered node_id \"n1\" after this process's heartbeat lapsed"),
        "{log}"
    );
    // The successor kept the lease and serves on.
    create_confirmed(&cluster, &successor.base(), &submitter, "after").await;
    assert_eq!(leases(&cluster).await[0].2, taken[0].2);
}
