//! The feed and the webhooks carry every chain's rows whatever the reading
//! node serves (README "Completion feed" and "Webhooks"): delivering a feed
//! row needs no chain RPC, so a node that serves only chain one still
//! delivers chain two's events when it holds the webhook's lease, and its
//! `GET /v1/completions` serves them behind a load balancer.
//!
//! Two real daemon processes on one database: n2 serves only the local
//! chain and holds the webhook's lease; n1 serves the local chain and base.

use crate::common::node::{FAST_LEASE, FAST_NODE};
use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::{
    common::{
        daemon::{key_var, Daemon, DEV_KEYS},
        free_port,
        receiver::Receiver,
        wait_until, Anvil, TestDb,
    },
    multi_chain::{on_chain, BASE_ID},
};

const SECRET_VAR: &str = "TXMGR_FEED_CHAINS_WEBHOOK_SECRET";
const WAIT: Duration = Duration::from_secs(60);

/// A node serving the chains `chains` (`(name, rpc url, chain id)`), with
/// the webhook `hook` to `url`; whoever takes a lease keeps it.
fn config(
    db: &TestDb,
    node_id: &str,
    port: u16,
    chains: &[(&str, String, u64)],
    url: &str,
) -> String {
    let mut toml = format!(
        r#"node_id = "{node_id}"
[database]
url = "{db_url}"
max_connections = 10
[http]
listen = "127.0.0.1:{port}"
{FAST_LEASE}
{FAST_NODE}
heartbeat_interval = "1s"
rebalance = false
[defaults]
finality = {{ confirmations = 2 }}
[submitters."{address}"]
signer = {{ kind = "env", env = "{key}" }}
[[webhooks]]
name = "hook"
url = "{url}"
secret_env = "{SECRET_VAR}"
events = ["CONFIRMED"]
start_at = "beginning"
backoff_initial = "100ms"
backoff_max = "500ms"
"#,
        db_url = db.url,
        address = DEV_KEYS[0].1,
        key = key_var(0),
    );
    for (name, rpc_url, chain_id) in chains {
        toml.push_str(&format!(
            "[chains.{name}]\nrpc_url = \"{rpc_url}\"\nchain_id = {chain_id}\n\
             poll_interval = \"200ms\"\nsweep_interval = \"1s\"\n"
        ));
    }
    toml
}

/// The node holding a live lease of the webhook `hook`.
async fn holder(db: &TestDb) -> Option<String> {
    sqlx::query_scalar(
        "SELECT owner_node FROM webhook_cursor WHERE webhook = 'hook' AND expires_at > now()",
    )
    .fetch_optional(&db.pool)
    .await
    .expect("webhook lease")
}

async fn create(client: &reqwest::Client, node: &Daemon, chain_id: u64, request_id: &str) -> Uuid {
    let answer = client
        .post(format!("{}/v1/transactions", node.base()))
        .json(&on_chain(Some(chain_id), DEV_KEYS[0].1, request_id))
        .send()
        .await
        .expect("create");
    assert_eq!(answer.status(), 202);
    let body: Value = answer.json().await.expect("json");
    body["tx_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("tx_id")
}

/// Every `(tx_id, chain_id)` of the pages of `GET <node>/v1/completions<query>`
/// from the beginning.
async fn feed(client: &reqwest::Client, node: &Daemon, query: &str) -> Vec<(String, u64)> {
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut url = format!("{}/v1/completions?limit=100{query}", node.base());
        if let Some(after) = &after {
            url.push_str(&format!("&after={after}"));
        }
        let answer = client.get(url).send().await.expect("feed");
        assert_eq!(answer.status(), 200, "GET /v1/completions{query}");
        let page: Value = answer.json().await.expect("json");
        let rows = page["items"].as_array().expect("items").clone();
        if rows.is_empty() {
            return items;
        }
        for row in rows {
            items.push((
                row["tx_id"].as_str().unwrap_or_default().to_owned(),
                row["chain_id"].as_u64().expect("chain_id"),
            ));
        }
        after = page["next_after"].as_str().map(str::to_owned);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_serving_one_chain_delivers_and_serves_the_other_chains_events() {
    std::env::set_var(SECRET_VAR, "feed-chains-secret");
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let receiver = Receiver::always_ok().await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let local_chain = ("local", local.rpc_url(), 31337u64);
    let base_chain = ("base", base.rpc_url(), BASE_ID);

    // n2 first: it takes the webhook's lease and keeps it (no rebalancing).
    let port = free_port();
    let n2 = Daemon::start(
        "n2",
        port,
        &config(
            &db,
            "n2",
            port,
            std::slice::from_ref(&local_chain),
            &receiver.url,
        ),
    )
    .await;
    n2.ready(&client).await;
    wait_until(WAIT, || async {
        holder(&db).await.as_deref() == Some("n2")
    })
    .await;
    let port = free_port();
    let n1 = Daemon::start(
        "n1",
        port,
        &config(
            &db,
            "n1",
            port,
            &[local_chain.clone(), base_chain],
            &receiver.url,
        ),
    )
    .await;
    n1.ready(&client).await;

    let on_base = create(&client, &n1, BASE_ID, "on-base").await;
    let on_local = create(&client, &n1, 31337, "on-local").await;
    wait_until(WAIT, || async {
        let confirmed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED' AND tx_id = ANY($1)",
        )
        .bind(vec![on_base, on_local])
        .fetch_one(&db.pool)
        .await
        .expect("states");
        confirmed == 2
    })
    .await;

    // The webhook: both events, delivered by n2, which serves one chain.
    let delivered = |tx_id: Uuid| {
        receiver
            .delivered()
            .iter()
            .any(|r| r.json["tx_id"].as_str() == Some(tx_id.to_string().as_str()))
    };
    wait_until(WAIT, || async { delivered(on_local) }).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !delivered(on_base) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        delivered(on_base),
        "the base chain's CONFIRMED event reached the receiver (webhook held by {:?}; received {:?})",
        holder(&db).await,
        receiver.delivered().iter().map(|r| r.json.clone()).collect::<Vec<_>>()
    );
    assert_eq!(
        holder(&db).await.as_deref(),
        Some("n2"),
        "n2 delivered both"
    );

    // The feed behind a load balancer: the same rows from either node, and
    // a `chain_id` filter for a chain the answering node does not serve.
    let every = [
        (on_base.to_string(), BASE_ID),
        (on_local.to_string(), 31337),
    ];
    for node in [&n1, &n2] {
        let rows = feed(&client, node, "").await;
        for row in &every {
            assert!(rows.contains(row), "{}: {row:?} in {rows:?}", node.node_id);
        }
        let rows = feed(&client, node, &format!("&chain_id={BASE_ID}")).await;
        assert_eq!(
            rows,
            [every[0].clone()],
            "{}: chain_id={BASE_ID}",
            node.node_id
        );
    }
}
