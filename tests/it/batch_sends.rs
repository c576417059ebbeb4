//! A leader's batch of transactions goes out as one JSON-RPC batch request,
//! its calls in nonce order (`chain.batch_sends`, README "How an intent is
//! executed"); an endpoint that refuses batches gets one request per
//! transaction from its refusal on, for `chain.batch_refusal_backoff`, and
//! nothing is lost either way.
//! Real anvil and Hardhat behind the fault proxy, real PostgreSQL.

use std::{collections::BTreeSet, time::Duration};

use crate::common::{
    dev_chain::{DevNode, Mining},
    hardhat::Hardhat,
    intents::{paused_backlog, DEV},
    invariants,
    node::{config_toml, TestNode},
    rpc_proxy::{Faults, ProxyCounts, RpcProxy},
    Anvil, TestDb,
};

/// Intents per leader batch, and batches in the backlog.
const BATCH: i64 = 16;
const BATCHES: i64 = 4;

/// The node's configuration: batches of [`BATCH`], nothing re-broadcast
/// while the test runs, the chain's endpoints `urls` (one: `rpc_url`;
/// several: `rpc_urls`).
fn config(db: &TestDb, urls: &[String]) -> String {
    let extra = format!("batch_size = {BATCH}\nmax_in_flight = 200\nresubmit_interval = \"1h\"");
    let toml = config_toml(&db.url, &urls[0], "n1", &extra);
    if urls.len() == 1 {
        return toml;
    }
    let list: Vec<String> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| format!("{{ name = \"e{i}\", url = \"{url}\" }}"))
        .collect();
    toml.replace(
        &format!("rpc_url = \"{}\"", urls[0]),
        &format!("rpc_urls = [{}]", list.join(", ")),
    )
}

/// Queues a backlog of full batches while the submitter is paused, releases
/// it at once, waits until every intent is mined and checks the chain;
/// the attempts' raw bytes in nonce order.
async fn backlog_through(chain: &impl DevNode, db: &TestDb, proxies: &[&RpcProxy]) -> Vec<String> {
    let (node, by_nonce) = backlog_mined(db, proxies).await;
    node.stop().await;
    invariants::check(&db.pool, chain, DEV, 0).await;
    by_nonce
}

/// [`backlog_through`] with the node still running (and the chain not
/// checked yet).
async fn backlog_mined(db: &TestDb, proxies: &[&RpcProxy]) -> (TestNode, Vec<String>) {
    let urls: Vec<String> = proxies.iter().map(|p| p.url()).collect();
    let node = TestNode::start(&config(db, &urls)).await;
    paused_backlog(&node, "b", BATCH * BATCHES).await;
    invariants::wait_mined(&db.pool, BATCH * BATCHES, Duration::from_secs(90)).await;
    let by_nonce: Vec<String> = sqlx::query_scalar(
        "SELECT '0x' || encode(raw_tx, 'hex') FROM tx_attempt ORDER BY nonce, attempt_no",
    )
    .fetch_all(&db.pool)
    .await
    .expect("attempts");
    assert_eq!(by_nonce.len() as i64, BATCH * BATCHES, "one attempt each");
    (node, by_nonce)
}

/// A proxy in front of `anvil` that refuses every JSON-RPC batch.
async fn refusing_batches(anvil: &Anvil, seed: u64) -> RpcProxy {
    let proxy = RpcProxy::start(&anvil.rpc_url(), seed).await;
    proxy.set(Faults {
        refuse_batches: true,
        ..Faults::default()
    });
    proxy
}

/// Every transaction reached `proxy` once, in nonce order.
fn sent_once_in_order(proxy: &RpcProxy, by_nonce: &[String]) -> ProxyCounts {
    assert_eq!(
        proxy.sent_raw(),
        by_nonce,
        "every send reached the endpoint once, in nonce order"
    );
    proxy.counts()
}

/// The distinct transactions `proxy` received. With several endpoints a
/// send returns at the first acceptance and the other endpoints' requests
/// run on, so a slower endpoint may get the next request before the last
/// one's: every transaction must reach it, in whatever order.
fn distinct_sent(proxy: &RpcProxy) -> BTreeSet<String> {
    proxy.sent_raw().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leaders_batch_goes_out_as_one_json_rpc_batch_on_anvil() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 21).await;
    let by_nonce = backlog_through(&anvil, &db, &[&proxy]).await;
    let counts = sent_once_in_order(&proxy, &by_nonce);
    assert!(
        counts.send_batches >= 1,
        "full batches went out as JSON-RPC batches: {counts:?}"
    );
    assert!(
        counts.send_requests < (BATCH * BATCHES) as u64,
        "fewer send requests than transactions: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leaders_batch_goes_out_as_one_json_rpc_batch_on_hardhat() {
    let db = TestDb::migrated().await;
    // Hardhat's automine refuses a nonce that arrives before its predecessor.
    let hardhat = Hardhat::start(Mining::Interval(Duration::from_millis(200))).await;
    let proxy = RpcProxy::start(&hardhat.rpc_url(), 22).await;
    let by_nonce = backlog_through(&hardhat, &db, &[&proxy]).await;
    let counts = sent_once_in_order(&proxy, &by_nonce);
    assert!(
        counts.send_batches >= 1,
        "full batches went out as JSON-RPC batches: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_refusing_batches_gets_one_request_per_transaction() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = refusing_batches(&anvil, 23).await;
    let (node, by_nonce) = backlog_mined(&db, &[&proxy]).await;
    // The ops view says how long the refusal still holds (the default
    // back-off, ten minutes).
    let (status, view) = node.request("GET", "/v1/ops/endpoints", None).await;
    assert_eq!(status, 200, "{view}");
    let left = view["chains"][0]["endpoints"][0]["batches_refused_secs_left"]
        .as_u64()
        .unwrap_or_else(|| panic!("the refusal is shown: {view}"));
    assert!((1..=600).contains(&left), "{view}");
    node.stop().await;
    invariants::check(&db.pool, &anvil, DEV, 0).await;
    let counts = sent_once_in_order(&proxy, &by_nonce);
    assert_eq!(
        counts.refused_batches, 1,
        "refused once, then never tried again: {counts:?}"
    );
    assert_eq!(counts.send_batches, 0, "{counts:?}");
    assert_eq!(
        counts.send_requests,
        (BATCH * BATCHES) as u64,
        "one request per transaction: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_that_stops_refusing_batches_gets_them_again_after_the_backoff() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = refusing_batches(&anvil, 29).await;
    let toml = config(&db, &[proxy.url()])
        .replace("chain_id = ", "batch_refusal_backoff = \"1s\"\nchain_id = ");
    assert!(toml.contains("batch_refusal_backoff = \"1s\""), "{toml}");
    let node = TestNode::start(&toml).await;
    paused_backlog(&node, "refused", BATCH).await;
    invariants::wait_mined(&db.pool, BATCH, Duration::from_secs(60)).await;
    let refused = proxy.counts();
    assert!(refused.refused_batches >= 1, "{refused:?}");
    assert_eq!(refused.send_batches, 0, "{refused:?}");

    // The refusal passes (a proxy's bad minute): once the back-off is over,
    // a backlog goes out in batches again. Each probe queues one more.
    proxy.set(Faults::default());
    let mut sent = BATCH;
    crate::common::wait_until(Duration::from_secs(60), || {
        let (node, db, proxy) = (&node, &db, &proxy);
        let prefix = format!("again{sent}-");
        sent += BATCH;
        let total = sent;
        async move {
            paused_backlog(node, &prefix, BATCH).await;
            invariants::wait_mined(&db.pool, total, Duration::from_secs(60)).await;
            proxy.counts().send_batches >= 1
        }
    })
    .await;
    let (_, view) = node.request("GET", "/v1/ops/endpoints", None).await;
    assert!(
        view["chains"][0]["endpoints"][0]["batches_refused_secs_left"].is_null(),
        "no refusal holds once batches go out: {view}"
    );
    node.stop().await;
    let counts = proxy.counts();
    assert_eq!(
        counts.refused_batches, refused.refused_batches,
        "{counts:?}"
    );
    assert!(
        counts.send_requests < sent as u64,
        "fewer send requests than transactions once batches are back: {counts:?}"
    );
    invariants::check(&db.pool, &anvil, DEV, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_sends_off_sends_one_request_per_transaction() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 24).await;
    let db_url = db.url.clone();
    let toml = config_toml(&db_url, &proxy.url(), "n1", "max_in_flight = 200")
        .replace("chain_id = ", "batch_sends = false\nchain_id = ");
    assert!(toml.contains("batch_sends = false"), "{toml}");
    let node = TestNode::start(&toml).await;
    paused_backlog(&node, "s", BATCH).await;
    invariants::wait_mined(&db.pool, BATCH, Duration::from_secs(60)).await;
    node.stop().await;
    let counts = proxy.counts();
    assert_eq!(counts.send_batches, 0, "{counts:?}");
    assert_eq!(counts.send_requests, BATCH as u64, "{counts:?}");
    invariants::check(&db.pool, &anvil, DEV, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_endpoints_each_get_the_batch_and_one_that_swallows_it_loses_nothing() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    // A backend that answers every send with its hash and never forwards
    // it: an acceptance that is worth nothing.
    let swallowing = RpcProxy::start(&anvil.rpc_url(), 25).await;
    swallowing.set(Faults {
        swallow_sends: true,
        ..Faults::default()
    });
    let honest = RpcProxy::start(&anvil.rpc_url(), 26).await;
    let by_nonce = backlog_through(&anvil, &db, &[&swallowing, &honest]).await;
    let all: BTreeSet<String> = by_nonce.iter().cloned().collect();
    assert_eq!(distinct_sent(&swallowing), all);
    assert_eq!(
        distinct_sent(&honest),
        all,
        "every send reached the honest endpoint"
    );
    let counts = [swallowing.counts(), honest.counts()];
    for each in &counts {
        assert!(
            each.send_batches >= 1,
            "each endpoint got batches: {counts:?}"
        );
        assert!(
            each.send_requests < (BATCH * BATCHES) as u64,
            "fewer send requests than transactions: {counts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_endpoint_refusing_batches_turns_the_chain_to_one_request_per_transaction() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let refusing = refusing_batches(&anvil, 27).await;
    let other = RpcProxy::start(&anvil.rpc_url(), 28).await;
    let by_nonce = backlog_through(&anvil, &db, &[&refusing, &other]).await;
    let all: BTreeSet<String> = by_nonce.iter().cloned().collect();
    // The other endpoint took the first batch, and each of its
    // transactions again, one per request, unless its acceptance of the
    // whole batch came before the refusal (then that batch counts as
    // accepted, as a single send accepted by one endpoint does).
    assert_eq!(
        distinct_sent(&other),
        all,
        "every send reached the other endpoint"
    );
    let counts = [refusing.counts(), other.counts()];
    assert!((1..=2).contains(&counts[0].refused_batches), "{counts:?}");
    assert_eq!(counts[0].send_batches, 0, "{counts:?}");
    assert!((1..=2).contains(&counts[1].send_batches), "{counts:?}");
    // From the refusal on, one request per transaction: the last batches
    // reached the refusing endpoint one by one, each once.
    let refused_sent = refusing.sent_raw();
    let refused_distinct = distinct_sent(&refusing);
    assert_eq!(refused_sent.len(), refused_distinct.len(), "each once");
    assert_eq!(counts[0].send_requests as usize, refused_sent.len());
    assert!(refused_distinct.is_subset(&all));
    let tail: BTreeSet<String> = by_nonce[(2 * BATCH) as usize..].iter().cloned().collect();
    assert!(
        tail.is_subset(&refused_distinct),
        "the last batches reached it"
    );
}
