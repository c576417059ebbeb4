//! The `pkcs11` signer on SoftHSM2 with real `txmgr run` processes and
//! anvil (issue 50): intents signed in the token confirm and each mined
//! transaction recovers to the key's address; a key whose address is not
//! the configured submitter's, and a wrong PIN, stop the daemon at start
//! with a clear message that never shows the PIN.

use std::time::Duration;

use alloy::primitives::Address;
use txmgr_client::{api::TxState, Client};

use crate::common::{
    daemon::Daemon,
    free_port,
    leader_kill::{send_across_a_leader_kill, transfer},
    node::{config_toml, KEY_VAR},
    softhsm::{SoftHsm, PIN},
    Anvil, TestDb, DEV_ADDRESS_0,
};

const TOKEN: &str = "hot";
const KEY: &str = "submitter-1";

/// A one-node configuration whose only submitter is `address`, signed by
/// `signer` (a TOML inline table), final at inclusion.
fn config(db: &TestDb, anvil: &Anvil, port: u16, address: Address, signer: &str) -> String {
    node_config("hsm-1", db, anvil, port, address, signer)
}

/// [`config`] for node `node_id`.
fn node_config(
    node_id: &str,
    db: &TestDb,
    anvil: &Anvil,
    port: u16,
    address: Address,
    signer: &str,
) -> String {
    config_toml(
        &db.url,
        &anvil.rpc_url(),
        node_id,
        "finality = { confirmations = 1 }",
    )
    .replace(&DEV_ADDRESS_0.to_lowercase(), &format!("{address:#x}"))
    .replace(
        &format!("signer = {{ kind = \"env\", env = \"{KEY_VAR}\" }}"),
        &format!("signer = {signer}"),
    ) + &format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n")
}

/// Sets `SOFTHSM2_CONF` for the daemons this test starts (each test runs
/// in its own process under nextest).
fn use_token(hsm: &SoftHsm) {
    std::env::set_var("SOFTHSM2_CONF", &hsm.conf);
}

async fn fund(anvil: &Anvil, address: Address) {
    anvil
        .rpc(
            "anvil_setBalance",
            serde_json::json!([format!("{address:#x}"), "0x56BC75E2D63100000"]),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intents_signed_in_softhsm_confirm_and_recover_to_the_keys_address() {
    let hsm = SoftHsm::new(TOKEN);
    let address = hsm.keygen(TOKEN, KEY, "01");
    use_token(&hsm);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    fund(&anvil, address).await;
    let port = free_port();
    let toml = config(&db, &anvil, port, address, &hsm.signer_toml(TOKEN, KEY));
    let daemon = Daemon::start("hsm-1", port, &toml).await;
    daemon.ready(&reqwest::Client::new()).await;
    assert!(!daemon.log().contains(PIN), "the PIN is never logged");

    let txmgr = Client::builder(daemon.base()).build().expect("client");
    let mut ids = Vec::new();
    for i in 0..6 {
        let created = txmgr
            .create(transfer(&format!("{address:#x}"), "hsm", i))
            .await
            .expect("create");
        ids.push(created.body.tx_id);
    }
    for id in ids {
        assert_eq!(
            confirmed_sender(&txmgr, &anvil, id).await,
            address,
            "the signature recovers to the HSM key's address"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_address_and_a_wrong_pin_stop_the_daemon_at_start() {
    let hsm = SoftHsm::new(TOKEN);
    let address = hsm.keygen(TOKEN, KEY, "01");
    use_token(&hsm);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;

    // The submitter configured is dev account 0; the key is another one.
    let other: Address = DEV_ADDRESS_0.parse().expect("address");
    let port = free_port();
    let toml = config(&db, &anvil, port, other, &hsm.signer_toml(TOKEN, KEY));
    let mut daemon = Daemon::start("hsm-1", port, &toml).await;
    let status = daemon
        .exited_within(Duration::from_secs(60))
        .await
        .expect("the daemon stops");
    assert!(!status.success());
    let log = daemon.log().to_lowercase();
    for shown in [format!("{address:#x}"), format!("{other:#x}")] {
        assert!(log.contains(&shown), "the error names {shown}: {log}");
    }

    // The right address, a wrong PIN.
    let wrong_pin = std::env::temp_dir().join(format!("txmgr-wrong-pin-{}", uuid::Uuid::new_v4()));
    std::fs::write(&wrong_pin, "999999\n").expect("pin file");
    let signer = hsm.signer_toml(TOKEN, KEY).replace(
        &hsm.pin_file.display().to_string(),
        &wrong_pin.display().to_string(),
    );
    let port = free_port();
    let toml = config(&db, &anvil, port, address, &signer);
    let mut daemon = Daemon::start("hsm-2", port, &toml).await;
    let status = daemon
        .exited_within(Duration::from_secs(60))
        .await
        .expect("the daemon stops");
    let _ = std::fs::remove_file(&wrong_pin);
    assert!(!status.success());
    let log = daemon.log();
    assert!(log.contains("refused the PIN"), "{log}");
    assert!(!log.contains("999999"), "the PIN is never shown: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_taken_away_makes_intents_wait_and_they_go_out_when_it_returns() {
    let hsm = SoftHsm::new(TOKEN);
    let address = hsm.keygen(TOKEN, KEY, "01");
    use_token(&hsm);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    fund(&anvil, address).await;
    let port = free_port();
    let toml = config(&db, &anvil, port, address, &hsm.signer_toml(TOKEN, KEY));
    let daemon = Daemon::start("hsm-1", port, &toml).await;
    let http = reqwest::Client::new();
    daemon.ready(&http).await;
    let txmgr = Client::builder(daemon.base()).build().expect("client");
    let send = |i: usize| transfer(&format!("{address:#x}"), "away", i);
    let first = txmgr.create(send(0)).await.expect("create");
    let first = txmgr
        .wait_final(first.body.tx_id, Duration::from_secs(60))
        .await
        .expect("final");
    assert_eq!(first.state, TxState::Confirmed);

    // The token "removed": its directory moved away.
    let away = hsm.tokens.with_extension("away");
    std::fs::rename(&hsm.tokens, &away).expect("move the token away");
    let waiting = txmgr.create(send(1)).await.expect("create").body.tx_id;
    let shown = wait_until_value(Duration::from_secs(60), || async {
        let actors = daemon.actors(&http).await?;
        let error = actors["submitters"]
            .as_array()?
            .iter()
            .find_map(|s| s["last_error"].as_str().map(str::to_owned))?;
        error.contains("PKCS#11").then_some(error)
    })
    .await;
    assert!(!shown.contains(PIN), "{shown}");
    let tx = txmgr.get(waiting).await.expect("read");
    assert!(
        !tx.state.is_terminal() && tx.tx_hash.is_none(),
        "the intent waits unsigned: {tx:?}"
    );

    // Back: it goes out and confirms, signed by the same key.
    std::fs::rename(&away, &hsm.tokens).expect("put the token back");
    let tx = txmgr
        .wait_final(waiting, Duration::from_secs(90))
        .await
        .expect("final");
    assert_eq!(tx.state, TxState::Confirmed, "{tx:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_daemons_sharing_one_token_send_each_intent_once_across_a_leader_kill() {
    let hsm = SoftHsm::new(TOKEN);
    let address = hsm.keygen(TOKEN, KEY, "01");
    use_token(&hsm);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    fund(&anvil, address).await;
    let signer = hsm.signer_toml(TOKEN, KEY);
    let http = reqwest::Client::new();
    let mut nodes = Vec::new();
    for node_id in ["hsm-1", "hsm-2"] {
        let port = free_port();
        let toml = node_config(node_id, &db, &anvil, port, address, &signer);
        let daemon = Daemon::start(node_id, port, &toml).await;
        daemon.ready(&http).await;
        nodes.push(daemon);
    }
    send_across_a_leader_kill(
        &anvil,
        &mut nodes,
        &format!("{address:#x}"),
        "shared",
        12,
        18,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_keys_on_one_token_share_the_modules_bounded_sessions() {
    let hsm = SoftHsm::new(TOKEN);
    let keys: Vec<(String, Address)> = (1..=3)
        .map(|i| {
            let label = format!("submitter-{i}");
            let address = hsm.keygen(TOKEN, &label, &format!("0{i}"));
            (label, address)
        })
        .collect();
    use_token(&hsm);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    for (_, address) in &keys {
        fund(&anvil, *address).await;
    }
    let signer = |label: &str| {
        hsm.signer_toml(TOKEN, label)
            .replace(" }", ", max_sessions = 2 }")
    };
    let port = free_port();
    let mut toml = config(&db, &anvil, port, keys[0].1, &signer(&keys[0].0));
    for (label, address) in &keys[1..] {
        toml.push_str(&format!(
            "\n[submitters.\"{address:#x}\"]\nsigner = {}\nfinality = {{ confirmations = 1 }}\n",
            signer(label)
        ));
    }
    let daemon = Daemon::start("hsm-1", port, &toml).await;
    let http = reqwest::Client::new();
    daemon.ready(&http).await;
    let txmgr = Client::builder(daemon.base()).build().expect("client");
    let mut ids = Vec::new();
    for i in 0..8 {
        for (n, (_, address)) in keys.iter().enumerate() {
            let created = txmgr
                .create(transfer(&format!("{address:#x}"), &format!("pool-{n}"), i))
                .await
                .expect("create");
            ids.push((created.body.tx_id, *address));
        }
    }
    for (id, address) in ids {
        assert_eq!(confirmed_sender(&txmgr, &anvil, id).await, address);
    }
    // One pool for the module: 3 keys, 24 signatures, at most 2 sessions
    // ever opened (none died), so never more than 2 open at once.
    let metrics = daemon.get_text(&http, "/metrics").await;
    let value = |name: &str| -> f64 {
        let prefix = format!("{name}{{module=\"libsofthsm2.so\"}} ");
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{prefix} in\n{metrics}"))
            .parse()
            .expect("a number")
    };
    crate::metrics_promtool::check_with_promtool(&metrics);
    let opened = value("txmgr_pkcs11_sessions_opened_total");
    let open = value("txmgr_pkcs11_sessions_open");
    assert!((1.0..=2.0).contains(&opened), "sessions opened: {opened}");
    assert!((1.0..=2.0).contains(&open), "sessions open: {open}");
}

/// Waits until `id` is final, checks it CONFIRMED and returns the sender
/// anvil recovers from the mined transaction's signature.
async fn confirmed_sender(txmgr: &Client, anvil: &Anvil, id: uuid::Uuid) -> Address {
    let tx = txmgr
        .wait_final(id, Duration::from_secs(60))
        .await
        .expect("final");
    assert_eq!(tx.state, TxState::Confirmed, "{tx:?}");
    let mined = anvil
        .rpc(
            "eth_getTransactionByHash",
            serde_json::json!([tx.mined_tx_hash.expect("mined hash")]),
        )
        .await;
    mined["from"]
        .as_str()
        .expect("from")
        .parse()
        .expect("address")
}

/// Polls `read` until it gives a value, for at most `deadline`.
async fn wait_until_value<T, F, Fut>(deadline: Duration, read: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = read().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "nothing within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
