//! The `aws_kms` signer end to end against a real KMS emulator (LocalStack,
//! loopback only) and real anvil: the whole pipeline signed by a KMS key
//! (originals, a fee bump, a cancel), clear errors for a wrong key spec, a
//! key of another address and KMS down at start, KMS frozen mid-burst (its
//! intents wait, an env-key submitter keeps confirming, no nonce signed
//! twice), and two nodes sharing one KMS key under fencing.

use std::time::Duration;

use alloy::{primitives::Address, signers::aws::aws_sdk_kms::types::KeySpec};
use serde_json::json;
use txmgr_actors::signer::{build_signer, SignerError, SignerSpec};
use txmgr_testkit::LocalStack;

use crate::common::{
    invariants,
    kms::{self, REGION},
    node::{config_toml, TestNode},
    txs::{action, attempts, wait_state, TO},
    wait_until, Anvil, TestDb, DEV, DEV_ADDRESS_0,
};

const WAIT: Duration = Duration::from_secs(60);
const HUNDRED_ETH: &str = "0x56bc75e2d63100000";

/// The base test node (dev account 0 with an env key) plus a KMS-backed
/// submitter; KMS requests bounded by 2 s.
fn config(db: &TestDb, anvil: &Anvil, node: &str, kms_table: &str) -> String {
    config_toml(
        &db.url,
        &anvil.rpc_url(),
        node,
        "finality = { confirmations = 1 }\nmax_in_flight = 32",
    )
    .replace(
        "poll_interval = \"200ms\"",
        "poll_interval = \"200ms\"\nrpc_timeout = \"2s\"",
    ) + "\n"
        + kms_table
        + "finality = { confirmations = 1 }\nmax_in_flight = 32\n"
}

async fn create_from(node: &TestNode, submitter: Address, request_id: &str) -> uuid::Uuid {
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(
                json!({"submitter": format!("{submitter:#x}"), "to": TO, "value": "1",
                "request_id": request_id}),
            ),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    body["tx_id"]
        .as_str()
        .expect("tx_id")
        .parse()
        .expect("uuid")
}

async fn confirmed(db: &TestDb, submitter: Address) -> i64 {
    db.count(&format!(
        "SELECT count(*) FROM managed_tx WHERE submitter = '{submitter:#x}' AND state = 'CONFIRMED'"
    ))
    .await
}

/// Every intent of `submitter` was signed for one nonce only.
async fn one_nonce_per_intent(db: &TestDb, submitter: Address) {
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM (SELECT a.tx_id FROM tx_attempt a JOIN managed_tx m USING (tx_id)
              WHERE m.submitter = '{submitter:#x}' GROUP BY a.tx_id
             HAVING count(DISTINCT a.nonce) > 1) t"
        ))
        .await,
        0,
        "an intent was signed with two nonces"
    );
}

async fn fund(anvil: &Anvil, address: Address) {
    anvil
        .rpc(
            "anvil_setBalance",
            json!([format!("{address:#x}"), HUNDRED_ETH]),
        )
        .await;
}

/// A LocalStack with one funded secp256k1 key, a database and an anvil.
/// Keep the whole value: dropping a part stops it.
struct KmsWorld {
    localstack: LocalStack,
    db: TestDb,
    anvil: Anvil,
    /// The key's address (funded with 100 ETH).
    address: Address,
    /// Its `[submitters."0x…"]` table.
    table: String,
}

impl KmsWorld {
    async fn start(anvil_args: &[&str]) -> KmsWorld {
        let localstack = LocalStack::start().await;
        let kms = kms::client(&localstack).await;
        let (key_id, address) = kms::ethereum_key(&kms).await;
        let db = TestDb::migrated().await;
        let anvil = Anvil::start_with(anvil_args).await;
        fund(&anvil, address).await;
        let table = kms::submitter_table(address, &key_id, &localstack);
        KmsWorld {
            localstack,
            db,
            anvil,
            address,
            table,
        }
    }

    /// The configuration of node `node_id`.
    fn config(&self, node_id: &str) -> String {
        config(&self.db, &self.anvil, node_id, &self.table)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kms_key_signs_originals_a_fee_bump_and_a_cancel_that_anvil_accepts() {
    let world = KmsWorld::start(&["--no-mining"]).await;
    let (db, anvil, address) = (&world.db, &world.anvil, world.address);
    let node = TestNode::start(&world.config("n1")).await;

    let bumped = create_from(&node, address, "k-bump").await;
    wait_state(&db.pool, bumped, "TRACKING", WAIT).await;
    let (status, body) = action(&node, bumped, "speedup", Some(json!({"reason": "kms"}))).await;
    assert_eq!(status, 202, "{body}");
    let cancelled = create_from(&node, address, "k-cancel").await;
    wait_state(&db.pool, cancelled, "TRACKING", WAIT).await;
    let (status, body) = action(&node, cancelled, "cancel", None).await;
    assert_eq!(status, 202, "{body}");
    for (tx_id, kind) in [(bumped, "bump"), (cancelled, "cancel")] {
        wait_until(WAIT, || async {
            attempts(&db.pool, tx_id)
                .await
                .iter()
                .any(|a| a.kind == kind && a.result.as_deref() == Some("accepted"))
        })
        .await;
    }
    let plain: Vec<uuid::Uuid> = {
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(create_from(&node, address, &format!("k-{i}")).await);
        }
        ids
    };
    for tx_id in &plain {
        wait_state(&db.pool, *tx_id, "TRACKING", WAIT).await;
    }
    anvil.mine().await;
    anvil.mine().await;
    wait_state(&db.pool, bumped, "CONFIRMED", WAIT).await;
    wait_state(&db.pool, cancelled, "CANCELLED", WAIT).await;
    for tx_id in plain {
        wait_state(&db.pool, tx_id, "CONFIRMED", WAIT).await;
    }
    // The ops view names the signer kind.
    let (_, view) = node.request("GET", "/v1/ops/actors", None).await;
    let row = view["submitters"]
        .as_array()
        .expect("submitters")
        .iter()
        .find(|s| s["submitter"] == format!("{address:#x}"))
        .expect("the KMS submitter")
        .clone();
    assert_eq!(row["signer_kind"], "aws_kms", "{row}");
    node.stop().await;
    invariants::check(&db.pool, anvil, &format!("{address:#x}"), 0).await;
    one_nonce_per_intent(db, address).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_spec_another_address_and_kms_down_are_clear_errors() {
    let mut localstack = LocalStack::start().await;
    let kms = kms::client(&localstack).await;
    let spec = |key_id: &str| SignerSpec::AwsKms {
        key_id: key_id.to_owned(),
        region: REGION.to_owned(),
        endpoint_url: Some(localstack.endpoint_url()),
        ca_file: None,
        max_concurrency: 4,
    };
    let timeout = Duration::from_secs(2);
    let address: Address = DEV_ADDRESS_0.parse().expect("address");

    let p256 = kms::create_key(&kms, KeySpec::EccNistP256).await;
    let err = build_signer(&spec(&p256), address, 31337, timeout)
        .await
        .expect_err("a P-256 key cannot sign for Ethereum");
    let message = err.to_string();
    assert!(matches!(err, SignerError::Config(_)), "{message}");
    assert!(
        message.contains(&p256) && message.contains("ECC_SECG_P256K1"),
        "{message}"
    );

    let (secp, its_address) = kms::ethereum_key(&kms).await;
    let err = build_signer(&spec(&secp), address, 31337, timeout)
        .await
        .expect_err("the key is another address's");
    assert!(
        matches!(err, SignerError::WrongAddress { got, .. } if got == its_address),
        "{err}"
    );

    let err = build_signer(&spec("no-such-key"), address, 31337, timeout)
        .await
        .expect_err("unknown key");
    assert!(
        !err.is_transient() && err.to_string().contains("no-such-key"),
        "{err}"
    );

    let secp_spec = spec(&secp);
    localstack.stop().await;
    let err = build_signer(&secp_spec, its_address, 31337, timeout)
        .await
        .expect_err("KMS down");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("unreachable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kms_frozen_mid_burst_holds_its_intents_while_others_confirm_and_nothing_is_signed_twice() {
    let world = KmsWorld::start(&["--block-time", "0.2"]).await;
    let (db, anvil, address) = (&world.db, &world.anvil, world.address);
    let node = TestNode::start(&world.config("n1")).await;
    let env_address: Address = DEV_ADDRESS_0.parse().expect("address");

    for i in 0..5 {
        create_from(&node, address, &format!("a{i}")).await;
        create_from(&node, env_address, &format!("e{i}")).await;
    }
    wait_until(WAIT, || async { confirmed(db, address).await == 5 }).await;

    world.localstack.pause();
    for i in 5..10 {
        create_from(&node, address, &format!("a{i}")).await;
        create_from(&node, env_address, &format!("e{i}")).await;
    }
    // The env-key submitter is not held up by the frozen KMS.
    wait_until(WAIT, || async { confirmed(db, env_address).await == 10 }).await;
    assert_eq!(
        confirmed(db, address).await,
        5,
        "nothing signed while KMS is frozen"
    );
    // Why it waits: in the ops view and in the metrics (transient).
    wait_until(WAIT, || async {
        let (_, view) = node.request("GET", "/v1/ops/actors", None).await;
        view["submitters"].as_array().is_some_and(|subs| {
            subs.iter().any(|s| {
                s["submitter"] == format!("{address:#x}")
                    && s["last_error"]
                        .as_str()
                        .is_some_and(|e| e.contains("signer unavailable"))
            })
        })
    })
    .await;
    let metrics = txmgr::daemon::metrics_recorder().expect("recorder");
    wait_until(WAIT, || async {
        // Labelled by chain too (its name depends on the configuration).
        metrics.render().lines().any(|line| {
            line.starts_with("txmgr_signer_requests_total{")
                && line.contains("kind=\"aws_kms\",result=\"unavailable\"")
        })
    })
    .await;

    world.localstack.resume();
    wait_until(WAIT, || async { confirmed(db, address).await == 10 }).await;
    node.stop().await;
    invariants::check(&db.pool, anvil, &format!("{address:#x}"), 0).await;
    invariants::check(&db.pool, anvil, DEV, 0).await;
    one_nonce_per_intent(db, address).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_sharing_one_kms_key_stay_fenced_across_a_crash() {
    let world = KmsWorld::start(&["--block-time", "0.2"]).await;
    let (db, anvil, address) = (&world.db, &world.anvil, world.address);
    let n1 = TestNode::start(&world.config("n1")).await;
    let n2 = TestNode::start(&world.config("n2")).await;
    for i in 0..10 {
        let node = if i % 2 == 0 { &n1 } else { &n2 };
        create_from(node, address, &format!("s{i}")).await;
    }
    let leader: String = crate::common::eventually(WAIT, Duration::from_millis(50), || async {
        sqlx::query_scalar(
            "SELECT owner_node FROM submitter_lease WHERE submitter = $1 AND expires_at > now()",
        )
        .bind(format!("{address:#x}"))
        .fetch_optional(&db.pool)
        .await
        .expect("lease")
    })
    .await;
    let (survivor, crashed) = if leader == "n1" { (n2, n1) } else { (n1, n2) };
    crashed.kill();
    for i in 10..20 {
        create_from(&survivor, address, &format!("s{i}")).await;
    }
    wait_until(WAIT, || async { confirmed(db, address).await == 20 }).await;
    survivor.stop().await;
    invariants::check(&db.pool, anvil, &format!("{address:#x}"), 0).await;
    one_nonce_per_intent(db, address).await;
}
