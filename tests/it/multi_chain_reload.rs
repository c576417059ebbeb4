//! Reloading a configuration of several chains: a submitter's chains and a
//! chain's `defaults` apply at once, per (chain, submitter); a chain added
//! starts (out of service when unreachable), a chain removed drains, both
//! without a restart; a changed chain still needs one.

use std::{path::PathBuf, time::Duration};

use alloy::primitives::Address;
use serde_json::json;

use crate::{
    common::{node::TestNode, wait_until, Anvil, TestDb, DEV_ADDRESS_0},
    multi_chain::{on_chain, two_chains_toml, BASE_ID, OTHER, OTHER_KEY, OTHER_KEY_VAR},
};

struct ConfigFile(PathBuf);

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_moves_a_submitter_onto_a_chain_and_retunes_one_chain() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    let base = Anvil::start_on_chain(BASE_ID, &[]).await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-multi-reload-{}.toml", uuid::Uuid::new_v4())),
    );
    let first = two_chains_toml(&db.url, &local, &base);
    std::fs::write(&file.0, &first).expect("write");
    let node = TestNode::start_file(&file.0).await;
    // OTHER sends on `local` only: a create on base is refused.
    let (status, _) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(BASE_ID), OTHER, "a")),
        )
        .await;
    assert_eq!(status, 400);

    // OTHER on both chains; base's defaults retuned; a third chain added.
    let second = first
        .replace("chains = [\"local\"]\n", "")
        .replace(
            "defaults = { finality = { confirmations = 2 } }",
            "defaults = { finality = { confirmations = 2 }, max_in_flight = 3 }",
        )
        .replace(
            "[lease]",
            "[chains.extra]\nrpc_url = \"http://127.0.0.1:9\"\nchain_id = 4242\n[lease]",
        );
    std::fs::write(&file.0, &second).expect("write");
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert!(
        report["added"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s == &json!(format!("base:{OTHER}")))),
        "{report}"
    );
    // The unreachable chain starts out of service, at once.
    assert_eq!(report["chains_added"], json!(["extra"]), "{report}");
    assert_eq!(report["restart_required"], json!([]), "{report}");
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(BASE_ID), OTHER, "b")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let base_engine = node
        .chains
        .iter()
        .find(|c| c.name == "base")
        .map(|c| c.engine.clone())
        .expect("base runs");
    let other: Address = OTHER.parse().expect("address");
    assert_eq!(
        base_engine.settings(other).map(|s| s.max_in_flight),
        Some(3)
    );
    let local_engine = node
        .chains
        .iter()
        .find(|c| c.name == "local")
        .map(|c| c.engine.clone())
        .expect("local runs");
    assert_ne!(
        local_engine.settings(other).map(|s| s.max_in_flight),
        Some(3),
        "base's defaults stay on base"
    );
    node.stop().await;
}

fn three_chains_toml(first: &str, third: &Anvil) -> String {
    first.replace(
        "[lease]",
        &format!(
            "[chains.third]\nrpc_url = \"{}\"\nchain_id = {THIRD_ID}\npoll_interval = \"200ms\"\n[lease]",
            third.rpc_url()
        ),
    )
}

const THIRD_ID: u64 = 4243;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_adds_a_chain_and_removes_one_without_a_restart() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    // base waits for 2 confirmations: blocks come on their own.
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let third = Anvil::start_on_chain(THIRD_ID, &[]).await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-chains-reload-{}.toml", uuid::Uuid::new_v4())),
    );
    let first = two_chains_toml(&db.url, &local, &base);
    std::fs::write(&file.0, &first).expect("write");
    let node = TestNode::start_file(&file.0).await;
    let dev = DEV_ADDRESS_0.to_lowercase();
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(BASE_ID), &dev, "on-base")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    db.wait_count(
        &format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = {BASE_ID} AND state = 'CONFIRMED'"
        ),
        1,
    )
    .await;

    // An endpoint serving another chain id than its table says rejects the
    // whole reload: nothing changes.
    let wrong = first.replace(
        "[lease]",
        &format!(
            "[chains.third]\nrpc_url = \"{}\"\nchain_id = 999\n[lease]",
            third.rpc_url()
        ),
    );
    std::fs::write(&file.0, &wrong).expect("write");
    let (status, body) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("chains.third"), "{body}");

    // base removed, third added.
    let second = three_chains_toml(&first, &third).replace(
        &format!(
            "[chains.base]\nrpc_url = \"{}\"\nchain_id = {BASE_ID}\npoll_interval = \"200ms\"\nsweep_interval = \"1s\"\ndefaults = {{ finality = {{ confirmations = 2 }} }}\n",
            base.rpc_url()
        ),
        "",
    );
    assert!(!second.contains("[chains.base]"), "{second}");
    std::fs::write(&file.0, &second).expect("write");
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["chains_added"], json!(["third"]), "{report}");
    assert_eq!(report["chains_removed"], json!(["base"]), "{report}");
    assert_eq!(report["restart_required"], json!([]), "{report}");

    // The removed chain is no longer served; its rows stay.
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(BASE_ID), &dev, "late")),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "chain_id", "{body}");
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = {BASE_ID}"
        ))
        .await,
        1
    );
    // Its leases were released by the drain.
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM submitter_lease WHERE chain_id = {BASE_ID} AND expires_at > now()"
        ))
        .await,
        0
    );
    // The added chain takes work with the same key, from nonce 0, and the
    // views list it.
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(THIRD_ID), &dev, "on-third")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    db.wait_count(
        &format!("SELECT count(*) FROM managed_tx WHERE chain_id = {THIRD_ID} AND state = 'CONFIRMED' AND nonce = 0"),
        1,
    )
    .await;
    let (status, actors) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(status, 200, "{actors}");
    let names: Vec<&str> = actors["chains"]
        .as_array()
        .expect("chains")
        .iter()
        .filter_map(|c| c["chain"].as_str())
        .collect();
    assert_eq!(names, ["local", "third"], "{actors}");
    let (status, ready) = node.request("GET", "/readyz", None).await;
    assert_eq!(status, 200, "{ready}");
    // `/metrics` shows the chains served, and nothing of the removed one
    // (its gauges would go on showing it healthy, its leases held).
    // (The readiness round sets the chain gauges: the added chain's after
    // its first round.)
    wait_until(Duration::from_secs(30), || async {
        let (_, metrics) = node.text("/metrics").await;
        ["local", "third"]
            .iter()
            .all(|served| metrics.contains(&format!("txmgr_chain_healthy{{chain=\"{served}\"}} 1")))
    })
    .await;
    let (status, metrics) = node.text("/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    assert!(!metrics.contains("chain=\"base\""), "{metrics}");
    // The completion feed covers the added chain.
    node.feed_when(&format!("/v1/completions?chain_id={THIRD_ID}"), |feed| {
        feed["items"].as_array().map(Vec::len) == Some(1)
    })
    .await;
    node.stop().await;
}
