//! Shared integration-test harness: every test owns a fresh PostgreSQL
//! database ([`TestDb`]) and its own anvil on a free loopback port
//! ([`Anvil`], from the `txmgr-testkit` crate) — or, for the core scenarios, Hardhat's node as well
//! ([`DevChain`]) —, and waits with deadline-bound polling ([`eventually`],
//! [`wait_until`]) instead of sleeping, so tests run in parallel and never
//! depend on timing luck.
//!
//! One module of the single integration binary (`tests/it/main.rs`), so
//! every helper here is used by some test; the compiler says when one is not.

pub(crate) mod browser;
pub(crate) mod clock;
pub(crate) mod cluster;
pub(crate) mod daemon;
pub(crate) mod db;
pub(crate) mod dev_chain;
pub(crate) mod faulty_chain;
pub(crate) mod hardhat;
pub(crate) mod intents;
pub(crate) mod invariants;
pub(crate) mod kms;
pub(crate) mod leader_kill;
pub(crate) mod load;
pub(crate) mod node;
pub(crate) mod otlp;
pub(crate) mod pg_cluster;
pub(crate) mod prometheus;
pub(crate) mod receiver;
pub(crate) mod rpc_proxy;
pub(crate) mod scenario;
pub(crate) mod softhsm;
pub(crate) mod tls;
pub(crate) mod txs;

pub(crate) use db::TestDb;
pub(crate) use intents::{transfer, transfer_from, DEV};
pub(crate) use scenario::Scenario;
// The kit's anvil, ports and polling, under the names the tests always used.
pub(crate) use dev_chain::{Client, DevChain, DevNode, Mining};
pub(crate) use txmgr_testkit::{
    eventually, free_port, parse_quantity, wait_until, Anvil, CHAIN_ID, DEV_ADDRESS_0,
    DEV_PRIVATE_KEY_0,
};

/// POSTs `body` as JSON to `base` + `path`; the status and the JSON answer
/// (`Null` when the answer is not JSON).
pub(crate) async fn post_json(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let response = client
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (
        status,
        response.json().await.unwrap_or(serde_json::Value::Null),
    )
}
