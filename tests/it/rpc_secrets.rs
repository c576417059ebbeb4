//! An API key in the RPC URL (`https://localhost:…/v2/SECRET123`) never
//! leaks: after transport failures on sends and reads, the marker appears in
//! no API response, no stored row, no log line (JSON and text, debug level),
//! no metric, no ops view and not in `txmgr config check`.
//!
//! The chain path is real: the daemon speaks TLS (private CA) to a
//! terminating proxy, behind it the fault proxy resets connections, behind
//! that anvil.

use std::{path::PathBuf, process::Stdio, time::Duration};

use crate::common::{
    eventually, free_port,
    rpc_proxy::{Faults, RpcProxy},
    tls::{TestCa, TlsProxy},
    wait_until, Anvil, TestDb,
};
use serde_json::json;
use tokio::io::AsyncReadExt;

const SECRET: &str = "SECRET123";

fn repo_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml")
}

/// Every row of every table of the test database, as text.
async fn all_rows(pool: &sqlx::PgPool) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_all(pool)
    .await
    .expect("tables");
    let mut text = String::new();
    for table in tables {
        let rows: Vec<String> =
            sqlx::query_scalar(&format!("SELECT row_to_json(t)::text FROM \"{table}\" t"))
                .fetch_all(pool)
                .await
                .expect("rows");
        text.push_str(&rows.join("\n"));
    }
    text
}

async fn scenario(format: &str) {
    let db = TestDb::migrated().await;
    // No mining until the test says so: the send error stays on the intent
    // (no receipt clears it) while the API view is read.
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let faulty = RpcProxy::start(&anvil.rpc_url(), 11).await;
    let ca = TestCa::new("secrets-ca");
    let upstream = faulty.url().trim_start_matches("http://").to_owned();
    let tls = TlsProxy::start(&ca.server("rpc"), &upstream).await;
    let rpc_url = format!("{}/v2/{SECRET}?apikey={SECRET}", tls.https_url());
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let envs = [
        ("TXMGR_LOG__FORMAT", format.to_owned()),
        ("TXMGR_LOG__LEVEL", "debug".to_owned()),
        ("TXMGR_DATABASE__URL", db.url.clone()),
        ("TXMGR_CHAIN__RPC_URL", rpc_url.clone()),
        ("TXMGR_CHAIN__CA_FILE", ca.ca_file.display().to_string()),
        ("TXMGR_CHAIN__POLL_INTERVAL", "200ms".to_owned()),
        ("TXMGR_CHAIN__RPC_TIMEOUT", "2s".to_owned()),
        ("TXMGR_NODE_ID", "secrets-node".to_owned()),
        ("TXMGR_HTTP__LISTEN", format!("127.0.0.1:{port}")),
        (
            "TXMGR_DEV_PRIVATE_KEY",
            crate::common::DEV_PRIVATE_KEY_0.to_owned(),
        ),
    ];
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"));
    daemon
        .args(["run", "--config"])
        .arg(repo_config())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in &envs {
        daemon.env(key, value);
    }
    let mut daemon = daemon.spawn().expect("spawn daemon");
    let mut stderr = daemon.stderr.take().expect("stderr");
    let err_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        buf
    });
    let client = reqwest::Client::new();
    let get = |path: &str| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let response = client.get(url).send().await.expect("GET");
            response.text().await.expect("body")
        }
    };
    wait_until(Duration::from_secs(30), || async {
        client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;

    // Every send is forwarded and then its connection reset (the answer is
    // lost), and some reads fail too: transport errors everywhere.
    faulty.set(Faults {
        send_drop_rate: 1.0,
        reset_rate: 0.3,
        ..Faults::default()
    });
    let created: serde_json::Value = client
        .post(format!("{base}/v1/transactions"))
        .json(&json!({
            "submitter": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            "value": "1",
            "request_id": "secrets-1",
        }))
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("create body");
    let tx_id = created["tx_id"].as_str().expect("tx_id").to_owned();
    let tx_view = eventually(
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let view = get(&format!("/v1/transactions/{tx_id}")).await;
            view.contains("endpoint default").then_some(view)
        },
    )
    .await;
    faulty.set(Faults::default());
    wait_until(Duration::from_secs(30), || async {
        anvil.mine().await;
        db.count("SELECT count(*) FROM managed_tx WHERE receipt IS NOT NULL")
            .await
            == 1
    })
    .await;

    let mut shown = vec![
        ("transaction", tx_view),
        (
            "transaction now",
            get(&format!("/v1/transactions/{tx_id}")).await,
        ),
        ("endpoints", get("/v1/ops/endpoints").await),
        ("actors", get("/v1/ops/actors").await),
        ("cluster", get("/v1/ops/cluster").await),
        ("metrics", get("/metrics").await),
        ("readyz", get("/readyz").await),
        ("rows", all_rows(&db.pool).await),
    ];
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["config", "check", "--config"])
        .arg(repo_config())
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("config check");
    assert!(check.status.success(), "{check:?}");
    shown.push((
        "config check",
        String::from_utf8_lossy(&check.stdout).into(),
    ));
    shown.push((
        "config check stderr",
        String::from_utf8_lossy(&check.stderr).into(),
    ));

    crate::common::daemon::terminate(&mut daemon).await;
    let logs = String::from_utf8_lossy(&err_task.await.expect("stderr task")).into_owned();
    assert!(logs.lines().count() > 5, "debug logs expected: {logs}");
    for line in logs.lines().filter(|l| l.contains("rror")).take(12) {
        eprintln!("{line}");
    }
    shown.push(("logs", logs));
    for (what, text) in shown {
        assert!(!text.contains(SECRET), "{SECRET} leaked in {what}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_in_the_rpc_url_never_leaks_with_json_logs() {
    scenario("json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_in_the_rpc_url_never_leaks_with_text_logs() {
    scenario("text").await;
}
