//! The submitter pipeline end to end on one node: HTTP create → actor →
//! nonce → sign → persist → broadcast, against real PostgreSQL and anvil.

use std::time::Duration;

use crate::common::{
    invariants,
    node::{config_toml, TestNode},
    transfer, Anvil, Client, DevChain, DevNode, Mining, Scenario, TestDb, DEV,
};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_intents_are_broadcast_and_mined_with_contiguous_nonces() {
    two_hundred_intents_mined_with_contiguous_nonces(Client::Anvil).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_intents_are_broadcast_and_mined_with_contiguous_nonces_on_hardhat() {
    two_hundred_intents_mined_with_contiguous_nonces(Client::Hardhat).await;
}

async fn two_hundred_intents_mined_with_contiguous_nonces(client: Client) {
    let db = TestDb::migrated().await;
    // Interval mining: anvil's automine can strand a burst of same-sender
    // transactions in its queue (a pool race of anvil's, not a chain rule),
    // and Hardhat's automine refuses any nonce that arrives before its
    // predecessor.
    let chain = DevChain::start(client, Mining::Interval(Duration::from_millis(200))).await;
    let node = TestNode::start(&config_toml(
        &db.url,
        &chain.rpc_url(),
        "n1",
        "max_in_flight = 64",
    ))
    .await;
    let mut first = None;
    for i in 0..200 {
        let (status, body) = node
            .request("POST", "/v1/transactions", Some(transfer(&format!("r{i}"))))
            .await;
        assert_eq!(status, 202, "{body}");
        first.get_or_insert(body["tx_id"].as_str().expect("tx_id").to_owned());
    }
    invariants::wait_mined(&db.pool, 200, Duration::from_secs(90)).await;
    invariants::check(&db.pool, &chain, DEV, 0).await;
    assert_eq!(
        db.count("SELECT count(*) FROM tx_attempt").await,
        200,
        "one signature each"
    );

    // Twelve more blocks: everything is past the default 12 confirmations.
    chain.mine_blocks(12).await;
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        200,
    )
    .await;
    let (status, body) = node
        .request(
            "GET",
            &format!("/v1/transactions/{}", first.expect("one")),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (body["state"].as_str(), body["nonce"].as_i64()),
        (Some("CONFIRMED"), Some(0))
    );
    assert!(body["confirmed_at"].is_string(), "{body}");
    assert_eq!(body["receipt"]["status"], 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_creates_with_one_request_id_make_one_intent_and_one_nonce() {
    let Scenario { db, anvil, node } = Scenario::single_node("").await;
    let answers = futures::future::join_all(
        (0..100).map(|_| node.request("POST", "/v1/transactions", Some(transfer("same")))),
    )
    .await;
    let mut ids = std::collections::HashSet::new();
    for (status, body) in &answers {
        assert!(*status == 202 || *status == 200, "{status} {body}");
        ids.insert(body["tx_id"].as_str().expect("tx_id").to_owned());
    }
    assert_eq!(ids.len(), 1, "every answer names the same intent");
    assert_eq!(
        answers.iter().filter(|(s, _)| *s == 202).count(),
        1,
        "one creation"
    );
    invariants::wait_mined(&db.pool, 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 1);
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_conflict_answers_409_and_consumes_no_nonce() {
    let Scenario { db, anvil, node } = Scenario::single_node("").await;
    let (status, first) = node
        .request("POST", "/v1/transactions", Some(transfer("k")))
        .await;
    assert_eq!(status, 202);
    let mut other = transfer("k");
    other["value"] = json!("2");
    let (status, body) = node.request("POST", "/v1/transactions", Some(other)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "idempotency_conflict");
    // The answer names the field and the intent that holds the id.
    assert_eq!(body["error"]["field"], "request_id", "{body}");
    assert_eq!(body["error"]["tx_id"], first["tx_id"], "{body}");
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer("k2")))
        .await;
    assert_eq!(status, 202);
    invariants::wait_mined(&db.pool, 2, Duration::from_secs(30)).await;
    // Nonces 0 and 1: the conflict took none.
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 2);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strict_mode_never_has_more_than_one_in_flight_and_leaves_no_gap() {
    // A block a second, so each intent waits in flight a while.
    // Strict mode: the next nonce only after the previous intent is final.
    let Scenario { db, anvil, node } = Scenario::single_node_on(
        &["--block-time", "1"],
        "max_in_flight = 1\nadvance_after = \"confirmed\"\nfinality = { confirmations = 2 }",
    )
    .await;
    for i in 0..5 {
        let (status, _) = node
            .request("POST", "/v1/transactions", Some(transfer(&format!("s{i}"))))
            .await;
        assert_eq!(status, 202);
    }
    let pool = db.pool.clone();
    let watcher = tokio::spawn(async move {
        let mut max_seen = 0i64;
        loop {
            let in_flight: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM managed_tx WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK')",
            )
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
            max_seen = max_seen.max(in_flight);
            let mined: i64 =
                sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'")
                    .fetch_one(&pool)
                    .await
                    .unwrap_or(0);
            if mined == 5 {
                return max_seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let max_seen = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .expect("all five confirmed in time")
        .expect("watcher");
    assert_eq!(max_seen, 1, "strict mode had {max_seen} in flight at once");
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_ingress_queue_answers_429_and_loses_nothing_accepted() {
    // Interval mining: anvil's automine can strand a burst of same-sender
    // transactions in its queue (a pool race of anvil's, not a chain rule).
    let Scenario { db, anvil, node } = Scenario::single_node_on(
        &["--block-time", "0.2"],
        "ingress_capacity = 2\nbatch_size = 2\nmax_in_flight = 200",
    )
    .await;
    let answers = futures::future::join_all(
        (0..200)
            .map(|i| node.request("POST", "/v1/transactions", Some(transfer(&format!("b{i}"))))),
    )
    .await;
    let accepted = answers.iter().filter(|(s, _)| *s == 202).count();
    let overloaded: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 429)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        accepted + overloaded.len(),
        200,
        "only 202 or 429: {answers:?}"
    );
    assert!(
        !overloaded.is_empty(),
        "a capacity of 2 must overflow under 200 concurrent creates"
    );
    assert_eq!(overloaded[0]["error"]["code"], "overloaded");
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx").await,
        accepted as i64
    );
    invariants::wait_mined(&db.pool, accepted as i64, Duration::from_secs(60)).await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fee_above_64_bits_is_stored_and_fails_no_create_of_its_batch() {
    let Scenario {
        db,
        anvil: _anvil,
        node,
    } = Scenario::single_node("").await;
    // Concurrent creates share the node-wide ingress writer's batches.
    let creates = (0..20).map(|i| {
        let mut body = transfer(&format!("big-fee-{i}"));
        if i == 7 {
            body["max_fee_per_gas"] = json!("18446744073709551616");
            body["max_priority_fee_per_gas"] = json!("1");
        }
        let node = &node;
        async move { node.request("POST", "/v1/transactions", Some(body)).await }
    });
    let answers = futures::future::join_all(creates).await;
    for (status, body) in &answers {
        assert_eq!(*status, 202, "{body}");
    }
    let big = answers[7].1["tx_id"].as_str().expect("tx_id").to_owned();
    let (status, body) = node
        .request("GET", &format!("/v1/transactions/{big}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let stored: Value = sqlx::query_scalar("SELECT intent FROM managed_tx WHERE tx_id = $1::uuid")
        .bind(&big)
        .fetch_one(&db.pool)
        .await
        .expect("stored intent");
    assert_eq!(stored["max_fee_per_gas"], json!("18446744073709551616"));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_create_the_database_refuses_fails_alone_not_its_batch() {
    let db = TestDb::migrated().await;
    // Stands in for any content the edge let through but PostgreSQL refuses.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'poison' USING ERRCODE = 'check_violation'; END $$;
         CREATE TRIGGER refuse_poison BEFORE INSERT ON managed_tx FOR EACH ROW
         WHEN (NEW.request_id = 'poison') EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&db.pool)
    .await
    .expect("trigger");
    let anvil = Anvil::start().await;
    let node = TestNode::start(&config_toml(&db.url, &anvil.rpc_url(), "n1", "")).await;
    let creates = (0..20).map(|i| {
        let request_id = if i == 11 {
            "poison".to_owned()
        } else {
            format!("neighbour-{i}")
        };
        let node = &node;
        async move {
            node.request("POST", "/v1/transactions", Some(transfer(&request_id)))
                .await
        }
    });
    let answers = futures::future::join_all(creates).await;
    for (i, (status, body)) in answers.iter().enumerate() {
        let expected = if i == 11 { 400 } else { 202 };
        assert_eq!(*status, expected, "create {i}: {body}");
    }
    assert_eq!(answers[11].1["error"]["code"], "invalid_request");
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx").await,
        19,
        "every other create was stored"
    );
    node.stop().await;
}
