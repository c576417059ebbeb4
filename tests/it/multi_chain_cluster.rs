//! Three real daemon processes serving two chains on one database: a
//! SIGKILLed node's (chain, submitter) leases are each taken over within the
//! fail-over bound, and nothing acknowledged is lost on either chain.

use crate::common::node::{FAST_LEASE, FAST_NODE, FAST_POLL};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{
    common::{
        daemon::{key_var, Daemon, DEV_KEYS},
        free_port, invariants, wait_until, Anvil, TestDb,
    },
    multi_chain::BASE_ID,
};

/// Fail-over bound of this cluster: lease `duration` + `renew_interval`
/// (4 s), plus the discovery interval and a margin for a loaded machine.
const TAKE_OVER_BOUND: Duration = Duration::from_secs(10);

fn config(db_url: &str, local: &Anvil, base: &Anvil, node_id: &str, port: u16) -> String {
    let mut submitters = String::new();
    for i in [0, 1] {
        submitters.push_str(&format!(
            "[submitters.\"{}\"]\nsigner = {{ kind = \"env\", env = \"{}\" }}\n",
            DEV_KEYS[i].1,
            key_var(i)
        ));
    }
    format!(
        r#"node_id = "{node_id}"
[database]
url = "{db_url}"
max_connections = 10
[http]
listen = "127.0.0.1:{port}"
[chains.local]
rpc_url = "{local}"
chain_id = 31337
{FAST_POLL}
[chains.base]
rpc_url = "{base}"
chain_id = {BASE_ID}
{FAST_POLL}
{FAST_LEASE}
{FAST_NODE}
heartbeat_interval = "1s"
[defaults]
max_in_flight = 32
finality = {{ confirmations = 2 }}
{submitters}"#,
        local = local.rpc_url(),
        base = base.rpc_url(),
    )
}

/// `(chain_id, submitter, owner_node)` of every live lease.
async fn live_leases(db: &TestDb) -> Vec<(i64, String, String)> {
    sqlx::query_as(
        "SELECT chain_id, submitter, owner_node FROM submitter_lease
          WHERE expires_at > now() ORDER BY chain_id, submitter",
    )
    .fetch_all(&db.pool)
    .await
    .expect("leases")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_node_of_three_hands_every_chains_leases_over_and_loses_nothing() {
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .expect("client");
    let mut daemons = Vec::new();
    for node_id in ["n1", "n2", "n3"] {
        let port = free_port();
        let daemon = Daemon::start(
            node_id,
            port,
            &config(&db.url, &local, &base, node_id, port),
        )
        .await;
        daemon.ready(&client).await;
        daemons.push(daemon);
    }
    // 40 intents per (chain, submitter), spread over the nodes.
    let mut sent = 0usize;
    let mut create = |daemons: &[Daemon], round: usize| {
        let mut requests = Vec::new();
        for chain in [31337u64, BASE_ID] {
            for (i, (_, address)) in DEV_KEYS.iter().take(2).enumerate() {
                let node = &daemons[(round + i) % daemons.len()];
                let body = json!({
                    "chain_id": chain, "submitter": address, "request_id": format!("c{round}"),
                    "to": "0x000000000000000000000000000000000000dEaD", "value": "1",
                });
                requests.push(
                    client
                        .post(format!("{}/v1/transactions", node.base()))
                        .json(&body)
                        .send(),
                );
            }
        }
        sent += requests.len();
        requests
    };
    for round in 0..20 {
        for answer in futures::future::join_all(create(&daemons, round)).await {
            assert_eq!(answer.expect("answer").status(), 202);
        }
    }
    wait_until(Duration::from_secs(30), || async {
        live_leases(&db).await.len() == 4
    })
    .await;

    // Kill the node holding the most leases.
    let leases = live_leases(&db).await;
    let victim = ["n1", "n2", "n3"]
        .into_iter()
        .max_by_key(|n| leases.iter().filter(|l| l.2 == *n).count())
        .expect("a node");
    let held = leases.iter().filter(|l| l.2 == victim).count();
    assert!(held >= 1, "{leases:?}");
    let killed_at = Instant::now();
    daemons
        .iter_mut()
        .find(|d| d.node_id == victim)
        .expect("victim")
        .kill()
        .await;
    let survivors: Vec<Daemon> = daemons
        .into_iter()
        .filter(|d| d.node_id != victim)
        .collect();
    // Creates keep coming to the survivors meanwhile.
    for round in 20..40 {
        for answer in futures::future::join_all(create(&survivors, round)).await {
            assert_eq!(answer.expect("answer").status(), 202);
        }
    }
    wait_until(TAKE_OVER_BOUND, || async {
        let leases = live_leases(&db).await;
        leases.len() == 4 && leases.iter().all(|l| l.2 != victim)
    })
    .await;
    let took = killed_at.elapsed();
    assert!(
        took <= TAKE_OVER_BOUND,
        "take-over of {held} leases took {took:?}"
    );

    // Everything acknowledged confirms, nonces contiguous per (chain, key).
    let sent = i64::try_from(sent).expect("count");
    wait_until(Duration::from_secs(60), || async {
        db.count("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
            .await
            == sent
    })
    .await;
    for (_, address) in DEV_KEYS.iter().take(2) {
        invariants::check_on(&db.pool, 31337, &local, address, 0).await;
        invariants::check_on(&db.pool, BASE_ID, &base, address, 0).await;
    }
}
