//! Live tuning of the real binary: edit `config.toml`, send SIGHUP, and the
//! running actor uses the new `max_in_flight` and `finality`; a broken file
//! is rejected and nothing changes.

use crate::common::free_port;

use std::{process::Stdio, time::Duration};

use crate::common::{
    node::{config_toml, KEY_VAR},
    txs::{create_transfer_at, intent, wait_state},
    wait_until, Anvil, TestDb, DEV_ADDRESS_0, DEV_PRIVATE_KEY_0,
};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn config(db: &TestDb, anvil: &Anvil, port: u16, tuning: &str) -> String {
    config_toml(
        &db.url,
        &anvil.rpc_url(),
        "hup",
        &format!("{tuning}\n[http]\nlisten = \"127.0.0.1:{port}\""),
    )
}

async fn max_in_flight(client: &reqwest::Client, base: &str) -> Option<u64> {
    let view: Value = client
        .get(format!("{base}/v1/ops/actors"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    view["submitters"].as_array()?.iter().find_map(|s| {
        (s["submitter"].as_str() == Some(&DEV_ADDRESS_0.to_lowercase()))
            .then(|| s["max_in_flight"].as_u64())
            .flatten()
    })
}

/// Deletes the test's configuration file at the end.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn hup(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_pushes_new_max_in_flight_and_finality_and_a_broken_file_changes_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let port = free_port();
    let path = std::env::temp_dir().join(format!("txmgr-hup-{}.toml", uuid::Uuid::new_v4()));
    let _cleanup = RemoveOnDrop(path.clone());
    let slow = "max_in_flight = 2\nfinality = { confirmations = 3 }";
    std::fs::write(&path, config(&db, &anvil, port, slow)).expect("write config");
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["run", "--config"])
        .arg(&path)
        .env(KEY_VAR, DEV_PRIVATE_KEY_0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn daemon");
    let pid = daemon.id().expect("running");
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let first = create_transfer_at(&client, &base, "before").await;
    wait_state(&db.pool, first, "TRACKING", WAIT).await;
    wait_until(WAIT, || async {
        max_in_flight(&client, &base).await == Some(2)
    })
    .await;

    let fast = "max_in_flight = 5\nfinality = { confirmations = 1 }";
    std::fs::write(&path, config(&db, &anvil, port, fast)).expect("rewrite config");
    hup(pid);
    wait_until(WAIT, || async {
        max_in_flight(&client, &base).await == Some(5)
    })
    .await;
    // One block on top of nothing: final at 1 confirmation, not at 3.
    anvil.mine().await;
    wait_state(&db.pool, first, "CONFIRMED", WAIT).await;

    // A broken file: rejected, the running configuration stays.
    std::fs::write(
        &path,
        config(
            &db,
            &anvil,
            port,
            "max_in_flight = 0\nfinality = { confirmations = 9 }",
        ),
    )
    .expect("break config");
    hup(pid);
    let second = create_transfer_at(&client, &base, "after").await;
    wait_state(&db.pool, second, "TRACKING", WAIT).await;
    anvil.mine().await;
    wait_state(&db.pool, second, "CONFIRMED", WAIT).await;
    assert_eq!(max_in_flight(&client, &base).await, Some(5));
    assert_eq!(intent(&db.pool, second).await.nonce, Some(1));
    assert!(
        daemon.try_wait().expect("status").is_none(),
        "still running"
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = tokio::time::timeout(WAIT, daemon.wait()).await;
}
