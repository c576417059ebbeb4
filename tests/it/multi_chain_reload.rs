//! Reloading a configuration of several chains: a submitter's chains and a
//! chain's `defaults` apply at once, per (chain, submitter); adding a chain
//! is reported as needing a restart.

use std::path::PathBuf;

use alloy::primitives::Address;
use serde_json::json;

use crate::{
    common::{node::TestNode, Anvil, TestDb},
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
    assert!(
        report["restart_required"]
            .as_array()
            .is_some_and(|keys| keys
                .iter()
                .any(|k| k.as_str().is_some_and(|k| k.starts_with("chains.extra")))),
        "{report}"
    );
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
