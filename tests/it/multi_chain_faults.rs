//! Several chains in one deployment under faults: one chain's outage (its
//! only endpoint frozen) neither slows the other chain nor takes the node
//! out of service; a chain unreachable at start starts out of service; an
//! endpoint serving another chain id still stops the start.

use crate::{
    common::{invariants, node::TestNode, Anvil, TestDb, DEV},
    multi_chain::{on_chain, two_chains_toml, BASE_ID, OTHER_KEY, OTHER_KEY_VAR},
};

/// Milliseconds from acceptance to CONFIRMED of each confirmed intent of
/// `chain_id` accepted at or after ingress sequence `from_seq`.
async fn confirm_latencies(db: &TestDb, chain_id: i64, from_seq: i64) -> Vec<f64> {
    sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM (confirmed_at - created_at))::float8 * 1000
           FROM managed_tx WHERE chain_id = $1 AND ingress_seq >= $2 AND state = 'CONFIRMED'",
    )
    .bind(chain_id)
    .bind(from_seq)
    .fetch_all(&db.pool)
    .await
    .expect("latencies")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_chains_outage_does_not_slow_the_other() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    // A frozen endpoint costs a call its whole timeout: keep it short, so a
    // chain sharing anything with the frozen one would show it at once.
    let toml = two_chains_toml(&db.url, &local, &base).replace(
        "sweep_interval = \"1s\"",
        "sweep_interval = \"1s\"\nrpc_timeout = \"1s\"\nunhealthy_after_failures = 1",
    );
    let node = TestNode::start(&toml).await;
    let burst = |chain: u64, prefix: &'static str| {
        let node = &node;
        async move {
            for i in 0..30 {
                let body = on_chain(Some(chain), DEV, &format!("{prefix}{i}"));
                let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
                assert_eq!(status, 202, "{answer}");
            }
        }
    };
    // Before the outage: both chains, their usual latency.
    burst(31337, "before-l").await;
    burst(BASE_ID, "before-b").await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        60,
    )
    .await;
    let usual = confirm_latencies(&db, 31337, 0).await;
    let usual_max = usual.iter().copied().fold(0.0, f64::max);

    // Base's only endpoint freezes mid-burst.
    let seq: i64 = sqlx::query_scalar("SELECT max(ingress_seq) + 1 FROM managed_tx")
        .fetch_one(&db.pool)
        .await
        .expect("seq");
    base.pause();
    let (b, l) = tokio::join!(burst(BASE_ID, "during-b"), burst(31337, "during-l"));
    let ((), ()) = (b, l);
    db.wait_count(
        &format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = 31337 AND state = 'CONFIRMED' \
             AND ingress_seq >= {seq}"
        ),
        30,
    )
    .await;
    let during = confirm_latencies(&db, 31337, seq).await;
    let during_max = during.iter().copied().fold(0.0, f64::max);
    // The other chain's intents confirm as they did before the outage (a
    // shared queue behind 1 s timeouts would add seconds to each).
    assert!(
        during_max <= usual_max * 3.0 + 1500.0,
        "local confirmed in up to {during_max:.0} ms during base's outage, {usual_max:.0} ms before"
    );
    // Base is shown failing; the node stays ready; base's intents wait.
    crate::common::wait_until(std::time::Duration::from_secs(20), || async {
        let (_, view) = node.request("GET", "/v1/ops/endpoints", None).await;
        view["chains"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["chain"] == "base" && c["healthy"] == 0)
    })
    .await;
    // Readiness follows on its next round: base out of service, the node
    // still ready (200 at every look).
    crate::common::wait_until(std::time::Duration::from_secs(10), || async {
        let (status, ready) = node.request("GET", "/readyz", None).await;
        assert_eq!(status, 200, "{ready}");
        ready["chains"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["chain"] == "base" && c["healthy"] == false)
    })
    .await;
    // The metric says the same: base out, local in.
    let (_, metrics) = node.text("/metrics").await;
    assert!(
        metrics.contains("txmgr_chain_healthy{chain=\"base\"} 0")
            && metrics.contains("txmgr_chain_healthy{chain=\"local\"} 1"),
        "{metrics}"
    );
    let waiting = db
        .count(&format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = {BASE_ID} AND state <> 'CONFIRMED'"
        ))
        .await;
    assert_eq!(waiting, 30, "base's burst is accepted and waits");

    // The endpoint returns: base's intents confirm, nonces contiguous.
    base.resume();
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        120,
    )
    .await;
    invariants::check_on(&db.pool, 31337, &local, DEV, 0).await;
    invariants::check_on(&db.pool, BASE_ID, &base, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chain_unreachable_at_start_starts_out_of_service_and_serves_once_it_answers() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    // Blocks keep coming: base's finality counts 2 confirmations.
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    base.pause();
    let toml = two_chains_toml(&db.url, &local, &base).replace(
        "sweep_interval = \"1s\"",
        "sweep_interval = \"1s\"\nrpc_timeout = \"1s\"",
    );
    // The node starts although base does not answer.
    let node = TestNode::start(&toml).await;
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(31337), DEV, "l")),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(BASE_ID), DEV, "b")),
        )
        .await;
    assert_eq!(status, 202, "accepted while base is out of service: {body}");
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE chain_id = 31337 AND state = 'CONFIRMED'",
        1,
    )
    .await;
    let (status, ready) = node.request("GET", "/readyz", None).await;
    assert_eq!(status, 200, "{ready}");
    base.resume();
    db.wait_count(
        &format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = {BASE_ID} AND state = 'CONFIRMED'"
        ),
        1,
    )
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_serving_another_chain_id_still_stops_the_start() {
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    // "base" is configured as 8453 but this anvil serves 4242.
    let wrong = Anvil::start_on_chain(4242, &[]).await;
    let toml = two_chains_toml(&db.url, &local, &wrong);
    let config = txmgr::config::Config::from_toml_str(&toml, std::iter::empty()).expect("valid");
    let owner = txmgr_actors::LeaseOwner::for_this_process("wrong");
    let identity: txmgr::daemon::WrapClient<'_> = &|_, client| client;
    let err = match txmgr::daemon::start_chains(&config, &owner, &db.pool, identity).await {
        Ok(_) => panic!("a chain served under another id must stop the start"),
        Err(err) => format!("{err:#}"),
    };
    assert!(err.contains("chains.base"), "{err}");
    assert!(err.contains("4242"), "{err}");
}

/// `(mined_tx_hash, receipt_block_number, receipt_block_hash)` of every
/// intent on `chain_id`, by nonce.
async fn receipts_on(db: &TestDb, chain_id: i64) -> Vec<(String, i64, String)> {
    sqlx::query_as(
        "SELECT mined_tx_hash, receipt_block_number, receipt_block_hash FROM managed_tx
          WHERE chain_id = $1 ORDER BY nonce",
    )
    .bind(chain_id)
    .fetch_all(&db.pool)
    .await
    .expect("receipts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reorg_on_one_chain_rolls_back_only_that_chains_receipts() {
    use std::time::Duration;
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    let base = Anvil::start_on_chain(BASE_ID, &[]).await;
    let toml = two_chains_toml(&db.url, &local, &base)
        .replace("confirmations = 2", "confirmations = 8")
        .replace("confirmations = 1", "confirmations = 8");
    let node = TestNode::start(&toml).await;
    for i in 0..3 {
        for chain in [31337, BASE_ID] {
            let body = on_chain(Some(chain), DEV, &format!("r{i}"));
            let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
            assert_eq!(status, 202, "{answer}");
        }
    }
    invariants::wait_mined(&db.pool, 6, Duration::from_secs(30)).await;
    local.mine_blocks(2).await;
    base.mine_blocks(2).await;
    let engine_of = |name: &str| {
        node.chains
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.engine.clone())
            .expect("chain runs")
    };
    let (local_head, base_head) = (local.block_number().await, base.block_number().await);
    crate::common::wait_until(Duration::from_secs(30), || async {
        engine_of("local").progress().head() >= local_head
            && engine_of("base").progress().head() >= base_head
    })
    .await;
    let local_before = receipts_on(&db, 31337).await;
    let base_before = receipts_on(&db, BASE_ID as i64).await;

    // Every base block from its first receipt up is replaced.
    let first = base_before
        .iter()
        .map(|r| r.1 as u64)
        .min()
        .expect("receipts");
    base.rpc(
        "anvil_reorg",
        serde_json::json!([base_head - first + 1, []]),
    )
    .await;
    db.wait_count(
        &format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = {BASE_ID} \
             AND receipt_block_number > {base_head}"
        ),
        3,
    )
    .await;
    // Local's receipts were never touched.
    assert_eq!(receipts_on(&db, 31337).await, local_before);
    let local_reopened = db
        .count("SELECT count(*) FROM managed_tx WHERE chain_id = 31337 AND sub_state = 'reorged'")
        .await;
    assert_eq!(local_reopened, 0);
    local.mine_blocks(8).await;
    base.mine_blocks(8).await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        6,
    )
    .await;
    let base_after = receipts_on(&db, BASE_ID as i64).await;
    for (before, after) in base_before.iter().zip(&base_after) {
        assert_eq!(before.0, after.0, "the identical bytes were re-included");
        assert!(after.1 > before.1, "in a later block");
    }
    assert_eq!(receipts_on(&db, 31337).await, local_before);
    invariants::check_on(&db.pool, 31337, &local, DEV, 0).await;
    invariants::check_on(&db.pool, BASE_ID, &base, DEV, 0).await;
    node.stop().await;
}
