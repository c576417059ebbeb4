//! Pause and resume (README "Guardrails"): an operator's pause through any
//! node is obeyed by the leader on another node (no nonce drawn, nothing
//! new sent), in-flight intents still confirm, creates wait QUEUED, and the
//! resume sends them in order; both are audited. `pause_accepts_creates =
//! false` refuses creates with 423 `paused`; `paused = true` in the
//! configuration holds allocation until a reload lifts it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    node::{config_toml, TestNode},
    post_json, wait_until, Anvil, TestDb, DEV,
};

fn transfer(submitter: &str, request_id: &str) -> Value {
    json!({"submitter": submitter, "to": SINK, "value": "1", "request_id": request_id})
}

/// `(state, nonce)` of every intent whose request id starts with `prefix`,
/// in request id order.
async fn states(db: &TestDb, prefix: &str) -> Vec<(String, Option<i64>)> {
    sqlx::query_as(
        "SELECT state, nonce FROM managed_tx WHERE request_id LIKE $1 || '%' ORDER BY request_id",
    )
    .bind(prefix)
    .fetch_all(&db.pool)
    .await
    .expect("states")
}

/// Mines until every intent of `prefix` is CONFIRMED.
async fn mine_until_confirmed(cluster: &Cluster, prefix: &str, count: usize) {
    wait_until(Duration::from_secs(30), || async {
        let states = states(&cluster.db, prefix).await;
        if states.len() == count && states.iter().all(|(s, _)| s == "CONFIRMED") {
            return true;
        }
        cluster.anvil.mine().await;
        false
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_through_one_node_holds_the_leader_on_another_and_resume_sends_in_order() {
    let spec = ClusterSpec {
        nodes: vec!["n1", "n2"],
        submitters: vec![0],
        strict: vec![],
        node_extra: "",
        confirmations: 1,
    };
    // Blocks only when the test mines: in-flight intents stay in flight.
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let cluster = Cluster::start(spec, anvil, None).await;
    let submitter = cluster.submitters[0].clone();
    let client = &cluster.client;

    // Two intents in flight, broadcast by the leader.
    let first = cluster.node_ref("n1").base();
    for i in 0..2 {
        let (status, answer) = post_json(
            client,
            &first,
            "/v1/transactions",
            transfer(&submitter, &format!("inflight-{i}")),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
    }
    wait_until(Duration::from_secs(30), || async {
        states(&cluster.db, "inflight-")
            .await
            .iter()
            .all(|(s, _)| s == "TRACKING")
    })
    .await;
    let leader = cluster.leader_of(&submitter).await.expect("a leader");
    let other = if leader == "n1" { "n2" } else { "n1" };
    let other_base = cluster.node_ref(other).base();
    let leader_base = cluster.node_ref(&leader).base();

    // Paused through the node that does not lead.
    let path = format!("/v1/ops/submitters/{submitter}/pause");
    let (status, answer) = post_json(client, &other_base, &path, json!({})).await;
    assert_eq!(status, 400, "a reason is required: {answer}");
    assert_eq!(answer["error"]["field"], "reason", "{answer}");
    let (status, answer) = post_json(
        client,
        &other_base,
        &path,
        json!({"reason": "incident 42: wrong payouts"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["paused"], true, "{answer}");
    assert_eq!(answer["node_id"], other, "{answer}");

    // Creates are accepted on either node and wait.
    for (i, base) in [&leader_base, &other_base, &leader_base].iter().enumerate() {
        let (status, answer) = post_json(
            client,
            base,
            "/v1/transactions",
            transfer(&submitter, &format!("during-{i}")),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
    }
    // The leader learns the pause at its next discovery (its ops view shows
    // it); the in-flight intents confirm meanwhile, cycles go on, and still
    // no nonce is drawn for what came after the pause.
    wait_until(Duration::from_secs(10), || async {
        let response = client
            .get(format!("{leader_base}/v1/ops/actors"))
            .send()
            .await;
        let Ok(response) = response else { return false };
        let view: Value = response.json().await.unwrap_or(Value::Null);
        view["submitters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["submitter"] == submitter.as_str() && s["paused"]["source"] == "api")
    })
    .await;
    mine_until_confirmed(&cluster, "inflight-", 2).await;
    let during = states(&cluster.db, "during-").await;
    assert_eq!(
        during,
        vec![("QUEUED".to_owned(), None); 3],
        "nothing allocated while paused"
    );
    let attempts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tx_attempt a JOIN managed_tx m ON m.tx_id = a.tx_id
          WHERE m.request_id LIKE 'during-%'",
    )
    .fetch_one(&cluster.db.pool)
    .await
    .expect("attempts");
    assert_eq!(attempts, 0, "nothing signed or sent while paused");
    // Any node shows why they wait, in a list and by request id.
    let list: Value = client
        .get(format!(
            "{other_base}/v1/transactions?submitter={submitter}&state=QUEUED"
        ))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let sub_states: Vec<&Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| &i["sub_state"])
        .collect();
    assert_eq!(sub_states, vec!["paused"; 3], "{list}");
    let one: Value = client
        .get(format!(
            "{leader_base}/v1/transactions?submitter={submitter}&request_id=during-1"
        ))
        .send()
        .await
        .expect("one")
        .json()
        .await
        .expect("json");
    assert_eq!(one["sub_state"], "paused", "{one}");

    // Resumed (through the leader this time): the queue goes out in order.
    let (status, answer) = post_json(
        client,
        &leader_base,
        &format!("/v1/ops/submitters/{submitter}/resume"),
        json!({"reason": "incident 42 resolved"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["previous_reason"], "incident 42: wrong payouts");
    mine_until_confirmed(&cluster, "during-", 3).await;
    let nonces: Vec<i64> = states(&cluster.db, "during-")
        .await
        .into_iter()
        .filter_map(|(_, n)| n)
        .collect();
    assert_eq!(
        nonces,
        [2, 3, 4],
        "after the in-flight ones, in create order"
    );

    // Both audited, with the chain and the node that took each request.
    let audit: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT action, reason, node_id FROM ops_audit
          WHERE action IN ('pause', 'resume') AND chain_id = 31337 ORDER BY id",
    )
    .fetch_all(&cluster.db.pool)
    .await
    .expect("audit");
    assert_eq!(
        audit,
        [
            (
                "pause".to_owned(),
                "incident 42: wrong payouts".to_owned(),
                other.to_owned()
            ),
            (
                "resume".to_owned(),
                "incident 42 resolved".to_owned(),
                leader.clone()
            ),
        ]
    );
    let _ = DEV;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_refusing_creates_answers_423_and_a_configured_pause_holds_until_reloaded() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let file = std::env::temp_dir().join(format!("txmgr-pause-{}.toml", uuid::Uuid::new_v4()));
    let toml = |extra: &str| {
        config_toml(&db.url, &anvil.rpc_url(), "n1", extra)
            + "[defaults]\nfinality = { confirmations = 1 }\n"
    };
    std::fs::write(&file, toml("pause_accepts_creates = false")).expect("write");
    let node = TestNode::start_file(&file).await;
    let pause = format!("/v1/ops/submitters/{DEV}/pause?halt_resubmits=true");
    let (status, answer) = node
        .request("POST", &pause, Some(json!({"reason": "key rotation"})))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["halt_resubmits"], true, "{answer}");
    let (status, answer) = node
        .request("POST", "/v1/transactions", Some(transfer(DEV, "refused")))
        .await;
    assert_eq!(status, 423, "{answer}");
    assert_eq!(answer["error"]["code"], "paused", "{answer}");
    let (_, view) = node.request("GET", "/v1/ops/actors", None).await;
    let paused = &view["submitters"][0]["paused"];
    assert_eq!(paused["reason"], "key rotation", "{view}");
    assert_eq!(paused["halt_resubmits"], true, "{view}");
    assert_eq!(paused["accepts_creates"], false, "{view}");
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/resume"),
            Some(json!({"reason": "done"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 0);

    // Paused by the configuration: creates wait, a reload lifts it.
    std::fs::write(&file, toml("paused = true")).expect("write");
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    let (status, answer) = node
        .request("POST", "/v1/transactions", Some(transfer(DEV, "held")))
        .await;
    assert_eq!(status, 202, "{answer}");
    let (_, view) = node.request("GET", "/v1/ops/actors", None).await;
    assert_eq!(
        view["submitters"][0]["paused"]["source"], "config",
        "{view}"
    );
    let (_, held) = node
        .request(
            "GET",
            &format!("/v1/transactions?submitter={DEV}&request_id=held"),
            None,
        )
        .await;
    assert_eq!(held["sub_state"], "paused", "{held}");
    // A second create wakes the leader again: still nothing drawn.
    let (status, _) = node
        .request("POST", "/v1/transactions", Some(transfer(DEV, "held-2")))
        .await;
    assert_eq!(status, 202);
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx WHERE nonce IS NOT NULL")
            .await,
        0
    );
    std::fs::write(&file, toml("")).expect("write");
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        2,
    )
    .await;
    let (_, held) = node
        .request(
            "GET",
            &format!("/v1/transactions?submitter={DEV}&request_id=held"),
            None,
        )
        .await;
    assert_eq!(held["sub_state"], Value::Null, "{held}");
    node.stop().await;
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_on_one_chain_leaves_the_same_key_sending_on_another() {
    use crate::multi_chain::{on_chain, two_chains_toml, BASE_ID, OTHER_KEY, OTHER_KEY_VAR};
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    // base waits for 2 confirmations: blocks come on their own.
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let node = TestNode::start(&two_chains_toml(&db.url, &local, &base)).await;
    // Several chains: the pause names its chain.
    let path = format!("/v1/ops/submitters/{DEV}/pause");
    let (status, answer) = node
        .request("POST", &path, Some(json!({"reason": "base incident"})))
        .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["field"], "chain_id", "{answer}");
    let (status, answer) = node
        .request(
            "POST",
            &format!("{path}?chain_id={BASE_ID}"),
            Some(json!({"reason": "base incident"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["chain_id"], BASE_ID, "{answer}");
    for (chain, id) in [(31337, "on-local"), (BASE_ID, "on-base")] {
        let (status, answer) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(on_chain(Some(chain), DEV, id)),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'on-local' AND state = 'CONFIRMED'",
        1,
    )
    .await;
    // base's leader has seen blocks since, and drew nothing.
    let head = base.block_number().await;
    wait_until(Duration::from_secs(30), || async {
        base.block_number().await >= head + 5
    })
    .await;
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM managed_tx WHERE chain_id = {BASE_ID} AND state = 'QUEUED' AND nonce IS NULL"
        ))
        .await,
        1
    );
    let audit: i64 = db
        .count(&format!(
            "SELECT count(*) FROM ops_audit WHERE action = 'pause' AND chain_id = {BASE_ID}"
        ))
        .await;
    assert_eq!(audit, 1);
    let (status, answer) = node
        .request(
            "POST",
            &format!("/v1/ops/submitters/{DEV}/resume?chain_id={BASE_ID}"),
            Some(json!({"reason": "base fine"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE request_id = 'on-base' AND state = 'CONFIRMED'",
        1,
    )
    .await;
    node.stop().await;
}
