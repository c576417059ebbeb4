//! The real `txmgr` binary logging JSON at debug level (issue 6): every
//! stderr line is a JSON object, and neither the signer's private key nor
//! the database password ever appears, even while a transaction is sent.

use crate::common::free_port;

use std::{path::PathBuf, process::Stdio, time::Duration};

use crate::common::{invariants, wait_until, Anvil, TestDb};
use serde_json::json;
use tokio::io::AsyncReadExt;

const PASSWORD: &str = "s3cr3t-pw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_debug_logs_never_contain_the_key_or_the_database_password() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    // Trust auth accepts any password, so the URL can carry a marker one.
    let url = db
        .url
        .replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    assert!(
        url.contains(PASSWORD),
        "unexpected test DB url shape: {}",
        db.url
    );
    let port = free_port();
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml");
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["run", "--config"])
        .arg(config)
        .env("RUST_LOG", "debug")
        .env("TXMGR_LOG__FORMAT", "json")
        .env("TXMGR_LOG__LEVEL", "debug")
        .env("TXMGR_DATABASE__URL", &url)
        .env("TXMGR_CHAIN__RPC_URL", anvil.rpc_url())
        .env("TXMGR_CHAIN__POLL_INTERVAL", "200ms")
        .env("TXMGR_NODE_ID", "log-test-node")
        .env("TXMGR_HTTP__LISTEN", format!("127.0.0.1:{port}"))
        .env("TXMGR_DEV_PRIVATE_KEY", crate::common::DEV_PRIVATE_KEY_0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn daemon");
    let mut stderr = daemon.stderr.take().expect("stderr");
    let mut stdout = daemon.stdout.take().expect("stdout");
    let err_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        buf
    });
    let out_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf).await;
        buf
    });

    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    wait_until(Duration::from_secs(30), || {
        let client = client.clone();
        let base = base.clone();
        async move {
            client
                .get(format!("{base}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    })
    .await;
    let response = client
        .post(format!("{base}/v1/transactions"))
        .json(&json!({
            "submitter": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            "value": "1",
            "request_id": "log-secrets-1",
        }))
        .send()
        .await
        .expect("create");
    assert_eq!(response.status().as_u16(), 202);
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;

    let exit = crate::common::daemon::terminate(&mut daemon).await;
    assert!(exit.success(), "{exit:?}");
    let stderr = String::from_utf8_lossy(&err_task.await.expect("stderr task")).into_owned();
    let stdout = String::from_utf8_lossy(&out_task.await.expect("stdout task")).into_owned();

    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.len() > 5,
        "expected debug logs on stderr, got: {stderr}"
    );
    for line in &lines {
        let parsed: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
        assert!(parsed.is_object(), "log line is not an object: {line}");
    }
    // Events inside a SubmitterActor carry its span: submitter, node id and
    // the fencing token of the lease it holds.
    let in_actor_span = lines.iter().any(|line| {
        let parsed: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        parsed["spans"].as_array().is_some_and(|spans| {
            spans.iter().any(|span| {
                span["name"] == "submitter"
                    && span["node_id"] == "log-test-node"
                    && span["submitter"].as_str().is_some_and(|s| {
                        s.starts_with("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266")
                    })
                    && span["fencing_token"].as_u64().is_some_and(|t| t >= 1)
            })
        })
    });
    assert!(
        in_actor_span,
        "no event carried the submitter span with a fencing token"
    );
    let key = crate::common::DEV_PRIVATE_KEY_0.trim_start_matches("0x");
    for (name, text) in [("stderr", &stderr), ("stdout", &stdout)] {
        assert!(
            !text.to_lowercase().contains(&key.to_lowercase()),
            "private key leaked on {name}"
        );
        assert!(
            !text.contains(PASSWORD),
            "database password leaked on {name}"
        );
    }
}
