//! Private sending (README "Several chains"): two proxies in front of one
//! anvil, one a public endpoint, one `role = "send_only"` (a private
//! mempool). A private submitter's and a private intent's bytes — first
//! sends, re-broadcasts and fee bumps — reach the send-only proxy and never
//! the public one.

use crate::common::node::{FAST_LEASE, FAST_POLL};
use std::{collections::HashSet, time::Duration};

use serde_json::{json, Value};

use crate::common::{
    node::{TestNode, KEY_VAR},
    rpc_proxy::RpcProxy,
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};

const OTHER: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const OTHER_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const OTHER_KEY_VAR: &str = "TXMGR_TEST_PRIVATE_SENDS_OTHER_KEY";

fn toml(db_url: &str, public: &str, relay: &str) -> String {
    format!(
        r#"
node_id = "private"
[database]
url = "{db_url}"
max_connections = 8
[chain]
chain_id = 31337
rpc_urls = [{{ name = "public", url = "{public}" }},
            {{ name = "relay", url = "{relay}", role = "send_only" }}]
{FAST_POLL}
{FAST_LEASE}
[defaults]
finality = {{ confirmations = 1 }}
resubmit_interval = "300ms"
max_resubmits = 100
gas_bump = {{ enabled = true }}
[submitters."{dev}"]
signer = {{ kind = "env", env = "{KEY_VAR}" }}
private_sends = true
[submitters."{OTHER}"]
signer = {{ kind = "env", env = "{OTHER_KEY_VAR}" }}
# No bumps: its unmined intents are re-broadcast with the same bytes.
gas_bump = {{ enabled = false }}
"#,
        dev = DEV_ADDRESS_0.to_lowercase(),
    )
}

fn transfer(submitter: &str, request_id: &str, private: bool) -> Value {
    json!({
        "submitter": submitter, "request_id": request_id, "private": private,
        "to": "0x000000000000000000000000000000000000dEaD", "value": "1",
    })
}

/// Every raw attempt (lower-case `0x` hex) of the intents matching `filter`.
async fn raws(db: &TestDb, filter: &str) -> HashSet<String> {
    let rows: Vec<Vec<u8>> = sqlx::query_scalar(&format!(
        "SELECT a.raw_tx FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id WHERE {filter}"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("attempts");
    rows.iter()
        .map(|raw| format!("0x{}", hex::encode(raw)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn private_bytes_reach_only_the_send_only_endpoint_bumps_and_rebroadcasts_included() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let public = RpcProxy::start(&anvil.rpc_url(), 1).await;
    let relay = RpcProxy::start(&anvil.rpc_url(), 2).await;
    let node = TestNode::start(&toml(&db.url, &public.url(), &relay.url())).await;
    let dev = DEV_ADDRESS_0.to_lowercase();
    for (submitter, id, private) in [
        (dev.as_str(), "p1", false),
        (dev.as_str(), "p2", false),
        (OTHER, "o1", false),
        (OTHER, "o2", true),
        (OTHER, "o3", false),
    ] {
        let (status, body) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(transfer(submitter, id, private)),
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }
    let private_filter =
        format!("m.submitter = '{dev}' OR (m.intent->>'private')::boolean IS TRUE");
    // Unmined, they are resubmitted with higher fees: wait for bumps.
    wait_until(Duration::from_secs(30), || async {
        db.count(&format!(
            "SELECT count(*) FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id \
             WHERE ({private_filter}) AND a.kind = 'bump'"
        ))
        .await
            >= 3
    })
    .await;
    anvil.rpc("evm_setAutomine", json!([true])).await;
    anvil.mine_blocks(2).await;
    wait_until(Duration::from_secs(30), || async {
        anvil.mine().await;
        db.count("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
            .await
            == 5
    })
    .await;

    let private = raws(&db, &private_filter).await;
    let public_ones = raws(&db, &format!("NOT ({private_filter})")).await;
    assert!(
        private.len() >= 6,
        "three intents, bumped: {}",
        private.len()
    );
    let to_public: HashSet<String> = public.sent_raw().into_iter().collect();
    let to_relay = relay.sent_raw();
    let leaked: Vec<&String> = private
        .iter()
        .filter(|raw| to_public.contains(*raw))
        .collect();
    assert!(
        leaked.is_empty(),
        "{} private attempts reached the public endpoint",
        leaked.len()
    );
    for raw in &private {
        assert!(
            to_relay.contains(raw),
            "a private attempt never reached the relay"
        );
    }
    // More relay sends than private attempts: the private intent of the
    // submitter without bumps was re-broadcast, still privately.
    let private_sends_count = to_relay.iter().filter(|raw| private.contains(*raw)).count();
    assert!(
        private_sends_count > private.len(),
        "{private_sends_count} sends"
    );
    // Public intents went to the public endpoint (and to the relay too).
    assert!(public_ones.iter().all(|raw| to_public.contains(raw)));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn private_sending_without_a_send_only_endpoint_is_refused_naming_the_key() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let text =
        toml(&db.url, &anvil.rpc_url(), "http://127.0.0.1:9").replace(", role = \"send_only\"", "");
    let err = txmgr::config::Config::from_toml_str(&text, std::iter::empty()).expect_err("refused");
    let dev = DEV_ADDRESS_0.to_lowercase();
    assert!(
        err.has_key(&format!("submitters.{dev}.private_sends")),
        "{err}"
    );
    // Without the private submitter, an intent asking for privacy is a 400.
    let text = text.replace("private_sends = true\n", "");
    let node = TestNode::start(&text).await;
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(transfer(OTHER, "x", true)))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "private", "{body}");
    node.stop().await;
}
