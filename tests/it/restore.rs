//! Backup and restore (issue 51, README "Backup and restore"): a node
//! confirms intents, the database is dumped with `pg_dump`, more intents
//! confirm, the node stops and the dump is restored with `pg_restore`. On
//! start the chain is ahead of the store: an `adopt` submitter moves its
//! nonce up (logged, audited with how far ahead) and new intents confirm on
//! the chain's next nonces, nothing sent twice; a `protect` submitter
//! stops with the reason instead and sends nothing.

use std::{path::Path, process::Stdio, time::Duration};

use txmgr_client::{api::TxState, Client};

use crate::common::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port,
    leader_kill::transfer,
    node::{config_toml, KEY_VAR},
    parse_quantity, Anvil, TestDb,
};

/// Runs a PostgreSQL client tool; panics with its output on failure.
async fn pg_tool(tool: &str, args: &[&str]) {
    let out = tokio::process::Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e} (Debian's postgresql-client)"));
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates `count` intents for `submitter` (request ids `<tag>-<i>`) and
/// waits until each is CONFIRMED; returns their nonces.
async fn confirm(client: &Client, submitter: &str, tag: &str, count: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    for i in 0..count {
        let created = client
            .create(transfer(submitter, tag, i))
            .await
            .expect("create");
        ids.push(created.body.tx_id);
    }
    let mut nonces = Vec::new();
    for id in ids {
        let tx = client
            .wait_final(id, Duration::from_secs(60))
            .await
            .expect("final");
        assert_eq!(tx.state, TxState::Confirmed, "{tx:?}");
        nonces.push(tx.nonce.expect("nonce"));
    }
    nonces
}

async fn chain_nonce(anvil: &Anvil, address: &str) -> u64 {
    parse_quantity(
        &anvil
            .rpc(
                "eth_getTransactionCount",
                serde_json::json!([address, "latest"]),
            )
            .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_database_behind_the_chain_adopts_or_protects_and_sends_nothing_twice() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let adopt = DEV_KEYS[0].1;
    let strict = DEV_KEYS[1].1;
    let port = free_port();
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "restore-1",
        "finality = { confirmations = 1 }",
    )
    .replace(
        &format!("env = \"{KEY_VAR}\""),
        &format!("env = \"{}\"", key_var(0)),
    ) + &format!(
        "[submitters.\"{strict}\"]\nsigner = {{ kind = \"env\", env = \"{}\" }}\n\
         finality = {{ confirmations = 1 }}\non_external_nonce = \"protect\"\n\
         [http]\nlisten = \"127.0.0.1:{port}\"\n",
        key_var(1)
    );
    let mut daemon = Daemon::start("restore-1", port, &toml).await;
    let http = reqwest::Client::new();
    daemon.ready(&http).await;
    let client = Client::builder(daemon.base()).build().expect("client");
    confirm(&client, adopt, "before-a", 3).await;
    confirm(&client, strict, "before-s", 3).await;

    let dump = std::env::temp_dir().join(format!("txmgr-{}.dump", db.name));
    let dump_path = dump.display().to_string();
    pg_tool("pg_dump", &["-Fc", "-d", &db.url, "-f", &dump_path]).await;

    // Accepted after the dump: the restore loses these rows, not the chain.
    confirm(&client, adopt, "after-a", 4).await;
    confirm(&client, strict, "after-s", 4).await;
    daemon.stop().await;
    pg_tool(
        "pg_restore",
        &[
            "--clean",
            "--if-exists",
            "--no-owner",
            "--single-transaction",
            "-d",
            &db.url,
            &dump_path,
        ],
    )
    .await;
    let _ = std::fs::remove_file(Path::new(&dump));
    let lost: i64 =
        sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE request_id LIKE 'after-%'")
            .fetch_one(&db.pool)
            .await
            .expect("read");
    assert_eq!(lost, 0, "the restored store is the dump's");

    daemon.restart();
    daemon.ready(&http).await;
    // The adopt submitter: new intents go out after the chain's nonces.
    let nonces = confirm(&client, adopt, "restored-a", 2).await;
    assert_eq!(nonces, [7, 8], "the chain's next nonces");
    assert_eq!(chain_nonce(&anvil, adopt).await, 9, "nothing sent twice");
    let (action, reason): (String, String) = sqlx::query_as(
        "SELECT action, reason FROM ops_audit WHERE actor = 'txmgr' AND submitter = $1",
    )
    .bind(adopt)
    .fetch_one(&db.pool)
    .await
    .expect("the adoption is audited");
    assert_eq!(action, "external_nonce_adopted");
    assert!(
        reason.contains("chain pending nonce 7 is 4 above txmgr's next nonce 3"),
        "{reason}"
    );
    assert!(
        daemon.log().contains("adopting the chain's nonce") && daemon.log().contains("ahead=4"),
        "{}",
        daemon.log()
    );

    // The strict submitter: an intent wakes it; it stops with PROTECT and
    // the reason instead, and sends nothing.
    let waiting = client
        .create(transfer(strict, "restored-s", 0))
        .await
        .expect("accepted: it waits for an operator")
        .body
        .tx_id;
    let protected = crate::common::eventually(
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async {
            let actors = daemon.actors(&http).await?;
            actors["submitters"]
                .as_array()?
                .iter()
                .find(|s| s["submitter"] == strict)?["protect_reason"]
                .as_str()
                .map(str::to_owned)
        },
    )
    .await;
    assert!(protected.contains("4 above"), "{protected}");
    let tx = client.get(waiting).await.expect("read");
    assert!(
        tx.tx_hash.is_none() && !tx.state.is_terminal(),
        "a protected submitter sends nothing: {tx:?}"
    );
    assert_eq!(chain_nonce(&anvil, strict).await, 7);
    let action: String =
        sqlx::query_scalar("SELECT action FROM ops_audit WHERE actor = 'txmgr' AND submitter = $1")
            .bind(strict)
            .fetch_one(&db.pool)
            .await
            .expect("the PROTECT is audited");
    assert_eq!(action, "external_nonce_protect");
    daemon.stop().await;
}
