//! `txmgr tx|feed|ops` against a real daemon and anvil (issue 49): each
//! command's `--json` output parsed, the table printed, and the documented
//! exit codes (README "Clients": 0 done, 3 no answer, 4 refused, 6 timed
//! out, 7 final but not CONFIRMED) checked.

use std::{path::Path, process::Output};

use serde_json::Value;

use crate::{
    client_sdk::{daemon_config, CLIENT_TOKEN, OPS_TOKEN},
    common::{daemon::Daemon, free_port, Anvil, TestDb, DEV_ADDRESS_0},
};

const RECIPIENT: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// Runs `txmgr` with `args` against `url` with `token` (in the environment).
async fn txmgr(url: &str, token: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(args)
        .env("TXMGR_URL", url)
        .env("TXMGR_TOKEN", token)
        .env_remove("TXMGR_TOKEN_FILE")
        .kill_on_drop(true)
        .output()
        .await
        .expect("run txmgr")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited")
}

fn json(output: &Output) -> Value {
    assert_eq!(
        code(output),
        0,
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_answers_with_json_tables_and_its_exit_code() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    anvil
        .rpc(
            "anvil_setCode",
            serde_json::json!(["0x00000000000000000000000000000000000ba11d", "0x60006000fd"]),
        )
        .await;
    let port = free_port();
    let daemon = Daemon::start("sdk-1", port, &daemon_config(&db, &anvil, port, None)).await;
    daemon.ready(&reqwest::Client::new()).await;
    let url = daemon.base();
    let me = DEV_ADDRESS_0.to_lowercase();

    // send --wait: progress on stderr, the final transaction on stdout.
    let sent = txmgr(
        &url,
        CLIENT_TOKEN,
        &[
            "tx",
            "send",
            "--submitter",
            &me,
            "--to",
            RECIPIENT,
            "--value",
            "1000",
            "--request-id",
            "cli-1",
            "--wait",
            "--timeout",
            "60s",
            "--json",
        ],
    )
    .await;
    let tx = json(&sent);
    assert_eq!(tx["state"], "CONFIRMED");
    let tx_id = tx["tx_id"].as_str().expect("tx_id").to_owned();

    // get, by id and by request id; the table by default.
    assert_eq!(
        json(&txmgr(&url, CLIENT_TOKEN, &["tx", "get", &tx_id, "--json"]).await)["tx_id"],
        tx_id.as_str()
    );
    let by_request = txmgr(
        &url,
        CLIENT_TOKEN,
        &[
            "tx",
            "get",
            "--submitter",
            &me,
            "--request-id",
            "cli-1",
            "--json",
        ],
    )
    .await;
    assert_eq!(json(&by_request)["tx_id"], tx_id.as_str());
    let table = txmgr(&url, CLIENT_TOKEN, &["tx", "get", &tx_id]).await;
    assert_eq!(code(&table), 0);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("state") && text.contains("CONFIRMED"),
        "{text}"
    );

    // A token from a file works as from the environment.
    let token_file = std::env::temp_dir().join(format!("txmgr-cli-token-{}", uuid::Uuid::new_v4()));
    std::fs::write(&token_file, format!("{CLIENT_TOKEN}\n")).expect("token file");
    let listed = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["tx", "list", "--submitter", &me, "--json", "--url", &url])
        .arg("--token-file")
        .arg(Path::new(&token_file))
        // A flag wins over the environment.
        .env("TXMGR_TOKEN", "not-the-token")
        .output()
        .await
        .expect("run");
    let _ = std::fs::remove_file(&token_file);
    assert_eq!(json(&listed)["items"].as_array().map(Vec::len), Some(1));

    // 4: refused, with the code and the field.
    let bad = txmgr(
        &url,
        CLIENT_TOKEN,
        &[
            "tx",
            "send",
            "--submitter",
            &me,
            "--to",
            RECIPIENT,
            "--value",
            "-1",
        ],
    )
    .await;
    assert_eq!(code(&bad), 4, "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("invalid_request (field value)"),
        "{}",
        stderr(&bad)
    );
    let conflict = txmgr(
        &url,
        CLIENT_TOKEN,
        &[
            "tx",
            "send",
            "--submitter",
            &me,
            "--to",
            RECIPIENT,
            "--value",
            "2",
            "--request-id",
            "cli-1",
        ],
    )
    .await;
    assert_eq!(code(&conflict), 4);
    assert!(
        stderr(&conflict).contains("idempotency_conflict") && stderr(&conflict).contains(&tx_id),
        "{}",
        stderr(&conflict)
    );
    let cancel = txmgr(
        &url,
        CLIENT_TOKEN,
        &["tx", "cancel", &tx_id, "--reason", "too late"],
    )
    .await;
    assert_eq!(code(&cancel), 4);
    assert!(
        stderr(&cancel).contains("invalid_state"),
        "{}",
        stderr(&cancel)
    );
    let no_token = txmgr(&url, "", &["tx", "get", &tx_id]).await;
    assert_eq!(code(&no_token), 4);
    assert!(
        stderr(&no_token).contains("unauthorized"),
        "{}",
        stderr(&no_token)
    );
    let not_ops = txmgr(&url, CLIENT_TOKEN, &["ops", "actors"]).await;
    assert_eq!(code(&not_ops), 4);
    assert!(
        stderr(&not_ops).contains("forbidden"),
        "{}",
        stderr(&not_ops)
    );

    // 7: final but not CONFIRMED.
    let reverted = txmgr(
        &url,
        CLIENT_TOKEN,
        &[
            "tx",
            "send",
            "--submitter",
            &me,
            "--to",
            "0x00000000000000000000000000000000000ba11d",
            "--gas-limit",
            "50000",
            "--wait",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&reverted), 7, "{}", stderr(&reverted));
    let reverted: Value = serde_json::from_slice(&reverted.stdout).expect("JSON");
    assert_eq!(reverted["state"], "FAILED_FINAL");

    // The feed: both completions, in order; wait on several ids by the feed.
    let feed = json(&txmgr(&url, CLIENT_TOKEN, &["feed", "tail", "--json"]).await);
    let events: Vec<&str> = feed["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|row| row["state"].as_str())
        .collect();
    assert_eq!(events, ["CONFIRMED", "FAILED_FINAL"]);
    let reverted_id = reverted["tx_id"].as_str().expect("id");
    let both = txmgr(
        &url,
        CLIENT_TOKEN,
        &[
            "tx",
            "wait",
            &tx_id,
            reverted_id,
            "--timeout",
            "30s",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&both), 7, "one of them is FAILED_FINAL");

    // Ops: views, pause (an intent then waits: 6 on timeout), resume.
    let actors = json(&txmgr(&url, OPS_TOKEN, &["ops", "actors", "--json"]).await);
    assert!(actors.is_object() || actors.is_array(), "{actors}");
    let cluster = txmgr(&url, OPS_TOKEN, &["ops", "cluster"]).await;
    assert_eq!(code(&cluster), 0, "{}", stderr(&cluster));
    assert!(!cluster.stdout.is_empty());
    for view in ["endpoints", "webhooks"] {
        json(&txmgr(&url, OPS_TOKEN, &["ops", view, "--json"]).await);
    }
    json(
        &txmgr(
            &url,
            OPS_TOKEN,
            &["ops", "pause", &me, "--reason", "cli test", "--json"],
        )
        .await,
    );
    let queued = json(
        &txmgr(
            &url,
            CLIENT_TOKEN,
            &[
                "tx",
                "send",
                "--submitter",
                &me,
                "--to",
                RECIPIENT,
                "--json",
            ],
        )
        .await,
    );
    let queued_id = queued["tx_id"].as_str().expect("id").to_owned();
    let waited = txmgr(
        &url,
        CLIENT_TOKEN,
        &["tx", "wait", &queued_id, "--timeout", "1s"],
    )
    .await;
    assert_eq!(code(&waited), 6, "{}", stderr(&waited));
    json(
        &txmgr(
            &url,
            OPS_TOKEN,
            &["ops", "resume", &me, "--reason", "cli test done", "--json"],
        )
        .await,
    );
    let done = txmgr(
        &url,
        CLIENT_TOKEN,
        &["tx", "wait", &queued_id, "--timeout", "60s"],
    )
    .await;
    assert_eq!(code(&done), 0, "{}", stderr(&done));

    // The other operator actions: restart, reload and unprotect (of a
    // submitter that is not protected: nothing to clear) answer; redeliver
    // of an unknown webhook is refused with its code.
    json(&txmgr(&url, OPS_TOKEN, &["ops", "restart", &me, "--json"]).await);
    json(&txmgr(&url, OPS_TOKEN, &["ops", "reload", "--json"]).await);
    json(
        &txmgr(
            &url,
            OPS_TOKEN,
            &["ops", "unprotect", &me, "--reason", "test", "--json"],
        )
        .await,
    );
    let redeliver = txmgr(&url, OPS_TOKEN, &["ops", "redeliver", "nosuch"]).await;
    assert_eq!(code(&redeliver), 4, "{}", stderr(&redeliver));
    assert!(
        stderr(&redeliver).contains("not_found"),
        "{}",
        stderr(&redeliver)
    );

    // 3: no answer.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let unreachable = txmgr(
        &closed,
        CLIENT_TOKEN,
        &["tx", "get", &tx_id, "--retries", "1"],
    )
    .await;
    assert_eq!(code(&unreachable), 3, "{}", stderr(&unreachable));
    // A send without an answer names the request id to send again with.
    let lost = txmgr(
        &closed,
        CLIENT_TOKEN,
        &[
            "tx",
            "send",
            "--submitter",
            &me,
            "--to",
            RECIPIENT,
            "--retries",
            "1",
        ],
    )
    .await;
    assert_eq!(code(&lost), 3, "{}", stderr(&lost));
    assert!(
        stderr(&lost).contains("send again with --request-id"),
        "{}",
        stderr(&lost)
    );
}
