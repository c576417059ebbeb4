//! Live reconfiguration (README "Configuration"): `POST /v1/ops/reload`
//! pushes changed settings into running actors, starts new submitters,
//! drains removed ones, reports restart-only keys, and rejects a bad file
//! with key + reason while the running configuration stays.

use std::{path::PathBuf, time::Duration};

use crate::common::{
    node::{config_toml, TestNode},
    wait_until, Anvil, TestDb, DEV,
};
use alloy::primitives::Address;
use serde_json::json;
use txmgr_actors::domain::Finality;

const SECOND: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const SECOND_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const SECOND_VAR: &str = "TXMGR_TEST_DEV_KEY_1";
const TO: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

fn second_submitter() -> String {
    format!("[submitters.\"{SECOND}\"]\nsigner = {{ kind = \"env\", env = \"{SECOND_VAR}\" }}\n")
}

struct ConfigFile(PathBuf);

impl ConfigFile {
    fn write(&self, text: &str) {
        std::fs::write(&self.0, text).expect("write config");
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn address(s: &str) -> Address {
    s.parse().expect("address literal")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_retunes_adds_removes_and_rejects_bad_files() {
    std::env::set_var(SECOND_VAR, SECOND_KEY);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-reload-{}.toml", uuid::Uuid::new_v4())),
    );
    let base = |extra: &str| config_toml(&db.url, &anvil.rpc_url(), "n1", extra);
    file.write(&base("max_in_flight = 4"));
    let node = TestNode::start_file(&file.0).await;
    let settings = node.engine.settings(address(DEV)).expect("configured");
    assert_eq!(settings.max_in_flight, 4);
    assert_eq!(
        settings.max_fee_per_gas_cap,
        Some(txmgr_actors::submitter::settings::DEFAULT_MAX_FEE_PER_GAS_CAP),
        "the default cap"
    );

    // New settings for the running submitter, a new submitter, and a
    // node-level key that needs a restart.
    let changed = base(
        "max_in_flight = 9\nmax_fee_per_gas_cap = \"500000000000\"\nfinality = { confirmations = 3 }\n",
    )
    .replace("poll_interval = \"200ms\"", "poll_interval = \"300ms\"")
        + &second_submitter();
    file.write(&changed);
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["updated"], json!([DEV]), "{report}");
    assert_eq!(report["added"], json!([SECOND]), "{report}");
    assert_eq!(
        report["restart_required"],
        json!(["chain.poll_interval"]),
        "{report}"
    );
    let settings = node.engine.settings(address(DEV)).expect("configured");
    assert_eq!(settings.max_in_flight, 9);
    assert_eq!(settings.max_fee_per_gas_cap, Some(500_000_000_000));
    assert_eq!(settings.finality, Finality::Confirmations(3));
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(json!({"submitter": SECOND, "to": TO, "value": "1"})),
        )
        .await;
    assert_eq!(status, 202, "the new submitter accepts work: {body}");
    wait_until(Duration::from_secs(30), || async {
        let (_, actors) = node.request("GET", "/v1/ops/actors", None).await;
        actors["submitters"].as_array().is_some_and(|rows| {
            rows.iter()
                .any(|r| r["submitter"] == SECOND && r["role"] == "leader")
        })
    })
    .await;

    // A broken file: 400 naming the key; nothing changes.
    file.write(&(base("max_in_flight = 0") + &second_submitter()));
    let (status, body) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_config");
    let field = body["error"]["field"].as_str().unwrap_or("");
    assert!(field.ends_with("max_in_flight"), "{body}");
    assert_eq!(
        node.engine.settings(address(DEV)).map(|s| s.max_in_flight),
        Some(9)
    );

    // Removing the new submitter: its creates get 422 at once.
    file.write(&changed.replace(&second_submitter(), ""));
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["removed"], json!([SECOND]), "{report}");
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(json!({"submitter": SECOND, "to": TO, "value": "1"})),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    // Once its one intent is final, the removed submitter's actor stops.
    wait_until(Duration::from_secs(30), || async {
        anvil.mine_blocks(2).await;
        let (_, actors) = node.request("GET", "/v1/ops/actors", None).await;
        actors["submitters"].as_array().is_some_and(|rows| {
            rows.iter()
                .any(|r| r["submitter"] == SECOND && r["draining"] == true && r["running"] == false)
        })
    })
    .await;
    let audited: Vec<Option<String>> =
        sqlx::query_scalar("SELECT outcome FROM ops_audit WHERE action = 'reload' ORDER BY id")
            .fetch_all(&db.pool)
            .await
            .expect("audit");
    let outcome = |o: &str| Some(o.to_owned());
    assert_eq!(
        audited,
        [outcome("done"), outcome("failed"), outcome("done")],
        "every reload is audited with its outcome"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_whose_audit_row_cannot_be_written_changes_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let file = ConfigFile(
        std::env::temp_dir().join(format!("txmgr-reload-{}.toml", uuid::Uuid::new_v4())),
    );
    let base = |extra: &str| config_toml(&db.url, &anvil.rpc_url(), "n1", extra);
    file.write(&base("max_in_flight = 4"));
    let node = TestNode::start_file(&file.0).await;
    sqlx::query(
        "ALTER TABLE ops_audit ADD CONSTRAINT no_reload CHECK (action <> 'reload') NOT VALID",
    )
    .execute(&db.pool)
    .await
    .expect("constraint");
    file.write(&base("max_in_flight = 9"));
    let (status, body) = node.request("POST", "/v1/ops/reload", None).await;
    assert!(status >= 500, "{status} {body}");
    assert_eq!(
        node.engine.settings(address(DEV)).map(|s| s.max_in_flight),
        Some(4),
        "a reload that could not be audited was applied"
    );
    node.stop().await;
}
