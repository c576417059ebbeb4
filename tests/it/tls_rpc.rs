//! TLS to the chain and to the signer, with a private CA made in the test:
//! the whole pipeline runs over `https://` (JSON-RPC), `wss://` (newHeads)
//! and an `https://` remote signer; an endpoint or signer whose certificate
//! does not verify stops the start with a clear error naming it, never its URL.

use std::time::Duration;

use crate::common::{
    node::{config_toml, TestNode, KEY_VAR},
    tls::{TestCa, TlsProxy},
    wait_until, Anvil, TestDb, DEV,
};
use serde_json::json;
use txmgr::config::Config;

const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

fn anvil_addr(anvil: &Anvil) -> String {
    anvil.rpc_url().trim_start_matches("http://").to_owned()
}

fn env_signer() -> String {
    format!("signer = {{ kind = \"env\", env = \"{KEY_VAR}\" }}")
}

/// `[chain]` with one endpoint over `https` / `wss` and the private CA.
fn tls_chain(toml: &str, proxy: &TlsProxy, ca: &TestCa, path: &str) -> String {
    toml.replace(
        "rpc_url = \"http://unused\"",
        &format!(
            "rpc_url = \"{}{path}\"\nws_url = \"{}\"\nca_file = \"{}\"",
            proxy.https_url(),
            proxy.wss_url(),
            ca.ca_file.display()
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_pipeline_runs_over_https_wss_and_an_https_signer() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("txmgr-test-ca");
    let chain_proxy = TlsProxy::start(&ca.server("rpc"), &anvil_addr(&anvil)).await;
    let signer_proxy = TlsProxy::start(&ca.server("signer"), &anvil_addr(&anvil)).await;
    let remote = format!(
        "signer = {{ kind = \"remote\", url = \"{}\", ca_file = \"{}\" }}",
        signer_proxy.https_url(),
        ca.ca_file.display()
    );
    let toml = config_toml(
        &db.url,
        "http://unused",
        "n1",
        "finality = { confirmations = 2 }",
    )
    .replace(&env_signer(), &remote);
    // Polling only every 60 s: heads must come over wss to confirm in time.
    let toml = tls_chain(&toml, &chain_proxy, &ca, "")
        .replace("poll_interval = \"200ms\"", "poll_interval = \"60s\"");
    let node = TestNode::start(&toml).await;

    let body = json!({"submitter": DEV, "to": TO, "value": "1", "request_id": "tls"});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
    let tx_id = answer["tx_id"].as_str().expect("tx_id").to_owned();
    wait_until(Duration::from_secs(20), || async {
        let mined: Option<i64> = sqlx::query_scalar("SELECT receipt_block_number FROM managed_tx")
            .fetch_one(&db.pool)
            .await
            .ok()
            .flatten();
        if mined.is_some() {
            anvil.mine().await;
        }
        let (_, tx) = node
            .request("GET", &format!("/v1/transactions/{tx_id}"), None)
            .await;
        tx["state"] == "CONFIRMED"
    })
    .await;
    let (_, view) = node.request("GET", "/v1/ops/endpoints", None).await;
    assert_eq!(
        view["endpoints"][0]["url"],
        chain_proxy.https_url(),
        "{view}"
    );
    assert_eq!(view["endpoints"][0]["healthy"], true, "{view}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_whose_certificate_does_not_verify_stops_the_start() {
    let anvil = Anvil::start().await;
    let ca = TestCa::new("right-ca");
    let other = TestCa::new("other-ca");
    let proxy = TlsProxy::start(&ca.server("rpc"), &anvil_addr(&anvil)).await;
    let toml = tls_chain(
        &config_toml(
            "postgres://postgres@127.0.0.1/unused",
            "http://unused",
            "n1",
            "",
        ),
        &proxy,
        &other,
        "/v2/SECRET123",
    );
    std::env::set_var(KEY_VAR, crate::common::DEV_PRIVATE_KEY_0);
    let config =
        Config::from_toml_str(&toml, std::iter::empty::<(String, String)>()).expect("valid config");
    let err = txmgr::daemon::connect_chain(&config)
        .await
        .expect_err("an untrusted certificate must stop the start");
    let text = format!("{err:#}");
    eprintln!("start-up error: {text}");
    assert!(
        text.contains("endpoint default"),
        "names the endpoint: {text}"
    );
    assert!(
        text.to_lowercase().contains("certificate"),
        "says why: {text}"
    );
    assert!(!text.contains("SECRET123"), "never the URL: {text}");

    // Without ca_file only the public roots are trusted: refused as well.
    let public_only = toml.replace(&format!("ca_file = \"{}\"", other.ca_file.display()), "");
    let config = Config::from_toml_str(&public_only, std::iter::empty::<(String, String)>())
        .expect("valid config");
    assert!(txmgr::daemon::connect_chain(&config).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_signer_with_an_untrusted_certificate_is_refused_at_start() {
    use txmgr_actors::signer::{build_signer, SignerSpec};
    let anvil = Anvil::start().await;
    let ca = TestCa::new("signer-ca");
    let other = TestCa::new("not-the-signer-ca");
    let proxy = TlsProxy::start(&ca.server("signer"), &anvil_addr(&anvil)).await;
    let address = DEV.parse().expect("address");
    let trusted = SignerSpec::remote(proxy.https_url(), Some(ca.ca_file.clone()));
    build_signer(
        &trusted,
        address,
        crate::common::CHAIN_ID,
        Duration::from_secs(5),
    )
    .await
    .expect("the signer's CA is trusted");
    let untrusted = SignerSpec::remote(
        format!("{}/key/SECRET123", proxy.https_url()),
        Some(other.ca_file.clone()),
    );
    let err = build_signer(
        &untrusted,
        address,
        crate::common::CHAIN_ID,
        Duration::from_secs(5),
    )
    .await
    .expect_err("untrusted certificate");
    let text = err.to_string();
    eprintln!("signer error: {text}");
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert!(!text.contains("SECRET123"), "{text}");
}
