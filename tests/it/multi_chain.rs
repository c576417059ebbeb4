//! Several chains in one deployment: the same key on two anvils with
//! different chain ids, one node serving both (README "Several chains").

use crate::common::node::{FAST_LEASE, FAST_NODE, FAST_POLL};
use serde_json::{json, Value};

use crate::common::{invariants, node::TestNode, Anvil, TestDb, DEV, DEV_ADDRESS_0};

/// The second chain's id (the first is the kit's 31337).
pub(crate) const BASE_ID: u64 = 8453;
/// A second submitter, enabled on the first chain only.
pub(crate) const OTHER: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
pub(crate) const OTHER_KEY: &str =
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
pub(crate) const OTHER_KEY_VAR: &str = "TXMGR_TEST_MULTI_CHAIN_OTHER_KEY";

pub(crate) fn two_chains_toml(db_url: &str, local: &Anvil, base: &Anvil) -> String {
    format!(
        r#"
node_id = "multi"
[database]
url = "{db_url}"
max_connections = 12
[chains.local]
rpc_url = "{local}"
chain_id = 31337
{FAST_POLL}
[chains.base]
rpc_url = "{base}"
chain_id = {BASE_ID}
{FAST_POLL}
defaults = {{ finality = {{ confirmations = 2 }} }}
{FAST_LEASE}
{FAST_NODE}
[defaults]
max_in_flight = 64
finality = {{ confirmations = 1 }}
[submitters."{dev}"]
signer = {{ kind = "env", env = "{key}" }}
[submitters."{OTHER}"]
signer = {{ kind = "env", env = "{OTHER_KEY_VAR}" }}
chains = ["local"]
"#,
        local = local.rpc_url(),
        base = base.rpc_url(),
        dev = DEV_ADDRESS_0.to_lowercase(),
        key = crate::common::node::KEY_VAR,
    )
}

pub(crate) fn on_chain(chain_id: Option<u64>, submitter: &str, request_id: &str) -> Value {
    let mut body = json!({
        "submitter": submitter,
        "request_id": request_id,
        "to": "0x000000000000000000000000000000000000dEaD",
        "value": "1",
    });
    if let Some(id) = chain_id {
        body["chain_id"] = json!(id);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_key_sends_on_two_chains_with_independent_contiguous_nonces() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let node = TestNode::start(&two_chains_toml(&db.url, &local, &base)).await;

    // 200 intents on each chain, interleaved, one request id reused across
    // chains (the idempotency key is (chain, submitter, request_id)).
    let mut ids = Vec::new();
    for i in 0..200 {
        for chain in [31337, BASE_ID] {
            let (status, body) = node
                .request(
                    "POST",
                    "/v1/transactions",
                    Some(on_chain(Some(chain), DEV, &format!("r{i}"))),
                )
                .await;
            assert_eq!(status, 202, "{body}");
            assert_eq!(body["chain_id"], chain, "{body}");
            ids.push((chain, body["tx_id"].as_str().expect("tx_id").to_owned()));
        }
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        400,
    )
    .await;
    invariants::check_on(&db.pool, 31337, &local, DEV, 0).await;
    invariants::check_on(&db.pool, BASE_ID, &base, DEV, 0).await;
    for chain in [31337, BASE_ID] {
        let per_chain = db
            .count(&format!(
                "SELECT count(*) FROM managed_tx WHERE chain_id = {chain} AND state = 'CONFIRMED'"
            ))
            .await;
        assert_eq!(per_chain, 200, "chain {chain}");
    }

    // Each transaction names its chain; a listing and the feed filter by it.
    let (chain, tx_id) = &ids[1];
    let (status, view) = node
        .request("GET", &format!("/v1/transactions/{tx_id}"), None)
        .await;
    assert_eq!((status, &view["chain_id"]), (200, &json!(chain)), "{view}");
    let (status, page) = node
        .request(
            "GET",
            &format!("/v1/transactions?submitter={DEV}&chain_id={BASE_ID}&limit=500"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), 200);
    assert!(items.iter().all(|item| item["chain_id"] == BASE_ID));
    let (_, both) = node
        .request(
            "GET",
            &format!(
                "/v1/transactions?submitter={DEV}&chain_id=31337&chain_id={BASE_ID}&limit=500"
            ),
            None,
        )
        .await;
    assert_eq!(both["items"].as_array().map(Vec::len), Some(400));
    let (status, one) = node
        .request(
            "GET",
            &format!("/v1/transactions?submitter={DEV}&request_id=r7&chain_id={BASE_ID}"),
            None,
        )
        .await;
    assert_eq!((status, &one["chain_id"]), (200, &json!(BASE_ID)), "{one}");
    let count = |n: usize| move |page: &Value| page["items"].as_array().map(Vec::len) == Some(n);
    let feed = node
        .feed_when(
            &format!("/v1/completions?chain_id={BASE_ID}&limit=1000"),
            count(200),
        )
        .await;
    let events = feed["items"].as_array().expect("items");
    assert!(events.iter().all(|e| e["chain_id"] == BASE_ID));
    node.feed_when("/v1/completions?limit=1000", count(400))
        .await;

    // The ops views group by chain.
    let (status, actors) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{actors}");
    let chains: Vec<&str> = actors["chains"]
        .as_array()
        .expect("chains")
        .iter()
        .filter_map(|c| c["chain"].as_str())
        .collect();
    assert_eq!(chains, vec!["base", "local"]);
    let (_, ready) = node.request("GET", "/readyz", None).await;
    assert_eq!(ready["chains"].as_array().map(Vec::len), Some(2), "{ready}");
    // Per-chain series carry the chain's name.
    let text = txmgr::daemon::metrics_recorder()
        .expect("recorder")
        .render();
    for chain in ["local", "base"] {
        for metric in [
            "txmgr_broadcasts_total{",
            "txmgr_fenced_writes_total{",
            "txmgr_rpc_endpoint_calls_total{",
            "txmgr_lease_acquisitions_total{",
        ] {
            let label = format!("chain=\"{chain}\"");
            assert!(
                text.lines()
                    .any(|l| l.starts_with(metric) && l.contains(&label)),
                "no {metric}{label} line"
            );
        }
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_create_must_name_a_served_chain_its_submitter_sends_on() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    let base = Anvil::start_on_chain(BASE_ID, &[]).await;
    let node = TestNode::start(&two_chains_toml(&db.url, &local, &base)).await;

    let expect_400 = |body: &Value, code: &str| {
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(body["error"]["field"], "chain_id", "{body}");
    };
    let (status, body) = node
        .request("POST", "/v1/transactions", Some(on_chain(None, DEV, "x")))
        .await;
    assert_eq!(status, 400);
    expect_400(&body, "missing_field");
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(10), DEV, "x")),
        )
        .await;
    assert_eq!(status, 400);
    expect_400(&body, "invalid_request");
    // OTHER sends on `local` only.
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(BASE_ID), OTHER, "x")),
        )
        .await;
    assert_eq!(status, 400);
    expect_400(&body, "invalid_request");
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(31337), OTHER, "x")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // A request id lookup across several chains must name one.
    let (status, body) = node
        .request(
            "GET",
            &format!("/v1/transactions?submitter={OTHER}&request_id=x"),
            None,
        )
        .await;
    assert_eq!(status, 400);
    expect_400(&body, "missing_field");
    node.stop().await;
    // Nothing was stored for the refused creates.
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 1);
}

/// Hardhat's node as the third chain's id.
const THIRD_ID: u64 = 1337;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_chains_on_two_clients_each_get_contiguous_nonces_for_one_key() {
    use crate::common::{hardhat::Hardhat, Mining};
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    // Hardhat's automine refuses a nonce that arrives before its predecessor.
    let third = Hardhat::start_on_chain(
        Mining::Interval(std::time::Duration::from_millis(200)),
        THIRD_ID,
    )
    .await;
    let toml = two_chains_toml(&db.url, &local, &base).replace(
        "[lease]",
        &format!(
            "[chains.third]\nrpc_url = \"{}\"\nchain_id = {THIRD_ID}\npoll_interval = \"200ms\"\n\
             sweep_interval = \"1s\"\n[lease]",
            third.rpc_url()
        ),
    );
    let node = TestNode::start(&toml).await;
    for i in 0..50 {
        for chain in [31337, BASE_ID, THIRD_ID] {
            let body = on_chain(Some(chain), DEV, &format!("t{i}"));
            let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
            assert_eq!(status, 202, "{answer}");
        }
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        150,
    )
    .await;
    invariants::check_on(&db.pool, 31337, &local, DEV, 0).await;
    invariants::check_on(&db.pool, BASE_ID, &base, DEV, 0).await;
    invariants::check_on(&db.pool, THIRD_ID, &third, DEV, 0).await;
    node.stop().await;
}
