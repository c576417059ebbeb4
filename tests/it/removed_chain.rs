//! After a reload removes a chain (README "Several chains", issue 47 items
//! 7 and 8): its intents stay readable, actions on them answer 409
//! `chain_not_served` and record nothing, and a token limited to the removed
//! chain reads nothing of the chains still served.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::node::token_toml;
use serde_json::Value;

use crate::{
    common::{node::TestNode, wait_until, Anvil, TestDb, DEV_ADDRESS_0},
    multi_chain::{on_chain, two_chains_toml, BASE_ID, OTHER_KEY, OTHER_KEY_VAR},
};

const OPS_TOKEN: &str = "removed-chain-ops-token";
const BASE_CLIENT_TOKEN: &str = "removed-chain-base-only-client";

struct ConfigFile(PathBuf);

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn auth_toml(dev: &str) -> String {
    token_toml("ops", "ops", OPS_TOKEN, &[])
        + &token_toml(
            "base-only",
            "client",
            BASE_CLIENT_TOKEN,
            &[&format!("base:{dev}")],
        )
}

/// A node serving `local` and `base` (base never mines), with one DEV
/// intent in flight on base and one on local; then a reload removes base
/// (and the base-only token's entry, which `[auth]` applies only at the
/// next start). Returns the node, the base and the local intent's ids.
async fn node_after_base_removed(
    db: &TestDb,
    local: &Anvil,
    base: &Anvil,
    file: &ConfigFile,
) -> (TestNode, String, String) {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let dev = DEV_ADDRESS_0.to_lowercase();
    let first = two_chains_toml(&db.url, local, base) + &auth_toml(&dev);
    std::fs::write(&file.0, &first).expect("write");
    let node = TestNode::start_file(&file.0).await;
    let ops = Some(OPS_TOKEN);
    let mut ids = Vec::new();
    for (chain, request_id) in [(BASE_ID, "on-base"), (31337, "on-local")] {
        let (status, body) = node
            .request_as(
                ops,
                "POST",
                "/v1/transactions",
                Some(on_chain(Some(chain), &dev, request_id)),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["tx_id"].as_str().expect("tx_id").to_owned());
    }
    // The base intent is signed and sent (never mined).
    let base_tx = format!("/v1/transactions/{}", ids[0]);
    wait_until(Duration::from_secs(30), || async {
        let (_, body) = node.request_as(ops, "GET", &base_tx, None).await;
        body["state"] == "TRACKING"
    })
    .await;

    let second = first
        .replace(
            &format!(
                "[chains.base]\nrpc_url = \"{}\"\nchain_id = {BASE_ID}\npoll_interval = \"200ms\"\nsweep_interval = \"1s\"\ndefaults = {{ finality = {{ confirmations = 2 }} }}\n",
                base.rpc_url()
            ),
            "",
        )
        .replace(&format!("submitters = [\"base:{dev}\"]\n"), "");
    assert!(
        !second.contains("[chains.base]") && !second.contains("base:"),
        "{second}"
    );
    std::fs::write(&file.0, &second).expect("write");
    let (status, report) = node.request_as(ops, "POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report["chains_removed"],
        serde_json::json!(["base"]),
        "{report}"
    );
    let base_tx = ids.remove(0);
    (node, base_tx, ids.remove(0))
}

fn config_file(what: &str) -> ConfigFile {
    ConfigFile(std::env::temp_dir().join(format!("txmgr-{what}-{}.toml", uuid::Uuid::new_v4())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intents_of_a_removed_chain_stay_readable_and_refuse_actions() {
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    let base = Anvil::start_on_chain(BASE_ID, &["--no-mining"]).await;
    let file = config_file("removed-chain");
    let (node, base_tx, _) = node_after_base_removed(&db, &local, &base, &file).await;
    let ops = Some(OPS_TOKEN);

    // Readable: by id, in the ops view, and by a token limited to base.
    let path = format!("/v1/transactions/{base_tx}");
    let (status, body) = node.request_as(ops, "GET", &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["chain_id"], BASE_ID, "{body}");
    assert_eq!(body["state"], "TRACKING", "{body}");
    let (status, body) = node
        .request_as(Some(BASE_CLIENT_TOKEN), "GET", &path, None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = node
        .request_as(ops, "GET", &format!("/v1/ops/transactions/{base_tx}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["transaction"]["tx_id"], base_tx.as_str(), "{body}");

    // Actions: 409 chain_not_served, nothing recorded.
    let audited = "SELECT count(*) FROM ops_audit";
    let before = db.count(audited).await;
    for action in ["cancel", "speedup", "rebroadcast", "requeue"] {
        let (status, body) = node
            .request_as(
                ops,
                "POST",
                &format!("/v1/transactions/{base_tx}/{action}"),
                None,
            )
            .await;
        assert_eq!(status, 409, "{action}: {body}");
        assert_eq!(body["error"]["code"], "chain_not_served", "{body}");
    }
    assert_eq!(
        db.count(audited).await,
        before,
        "a refused action is not audited"
    );
    let requested = db
        .count(&format!(
            "SELECT count(*) FROM managed_tx WHERE tx_id = '{base_tx}' AND requested_action IS NOT NULL"
        ))
        .await;
    assert_eq!(requested, 0, "a refused action is not recorded");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_of_a_removed_chain_reads_nothing_on_the_chains_still_served() {
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    let base = Anvil::start_on_chain(BASE_ID, &["--no-mining"]).await;
    let file = config_file("removed-chain-scope");
    let (node, _, local_tx) = node_after_base_removed(&db, &local, &base, &file).await;
    let dev = DEV_ADDRESS_0.to_lowercase();
    let scoped = Some(BASE_CLIENT_TOKEN);

    // By request id: the one chain served is not one the token may use.
    let (status, body): (u16, Value) = node
        .request_as(
            scoped,
            "GET",
            &format!("/v1/transactions?submitter={dev}&request_id=on-local"),
            None,
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["field"], "submitter", "{body}");
    // By id and by listing: nothing either.
    let (status, body) = node
        .request_as(scoped, "GET", &format!("/v1/transactions/{local_tx}"), None)
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = node
        .request_as(
            scoped,
            "GET",
            &format!("/v1/transactions?submitter={dev}"),
            None,
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["field"], "submitter", "{body}");
    node.stop().await;
}
