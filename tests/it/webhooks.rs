//! Push delivery end to end (README "Webhooks"): a receiver written in the
//! test, one node on real PostgreSQL and anvil. Retries keep the delivery
//! id and the order per submitter; 4xx and exhausted retries dead-letter
//! without holding back other webhooks; redelivery works; a taken-over
//! webhook lease fences the old holder's cursor writes.

use std::{collections::HashSet, time::Duration};

use serde_json::Value;
use txmgr_actors::{
    store::{
        completions::FeedCursor,
        webhook_lease::{self, WebhookKey},
        webhooks::{self, Progress},
    },
    submitter::LeaseTiming,
    webhook::signature,
    LeaseOwner,
};

use crate::common::{
    eventually,
    node::{config_toml, TestNode},
    receiver::Receiver,
    tls::{TestCa, TlsProxy},
    transfer, wait_until, Scenario, TestDb,
};

/// The variable the tests' webhooks read their secret from.
const SECRET_VAR: &str = "TXMGR_TEST_WEBHOOK_SECRET";
const SECRET: &str = "whsec-test-0123456789";
const CONFIRMED_WITHIN: Duration = Duration::from_secs(60);

/// One `[[webhooks]]` table with quick retries.
fn webhook(name: &str, url: &str, extra: &str) -> String {
    format!(
        "\n[[webhooks]]\nname = \"{name}\"\nurl = \"{url}\"\nsecret_env = \"{SECRET_VAR}\"\n\
         backoff_initial = \"50ms\"\nbackoff_max = \"200ms\"\ntimeout = \"2s\"\n\
         start_at = \"beginning\"\n{extra}\n"
    )
}

/// A node with interval mining and one confirmation, plus `webhooks`.
async fn scenario(webhooks: &str) -> Scenario {
    std::env::set_var(SECRET_VAR, SECRET);
    Scenario::single_node_on(
        &["--block-time", "0.2"],
        &format!("max_in_flight = 64\nfinality = {{ confirmations = 1 }}\n{webhooks}"),
    )
    .await
}

async fn create(scenario: &Scenario, n: usize, prefix: &str) {
    create_on(&scenario.node, n, prefix).await;
}

async fn create_on(node: &TestNode, n: usize, prefix: &str) {
    for i in 0..n {
        let (status, body) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(transfer(&format!("{prefix}{i}"))),
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }
}

fn cursor_of(json: &Value) -> FeedCursor {
    FeedCursor::parse(json["cursor"].as_str().expect("cursor")).expect("cursor token")
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

async fn ops_webhooks(scenario: &Scenario) -> Value {
    let (status, body) = scenario.node.request("GET", "/v1/ops/webhooks", None).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn find<'a>(view: &'a Value, name: &str) -> Option<&'a Value> {
    view["webhooks"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == name)
}

fn status_of<'a>(view: &'a Value, name: &str) -> &'a Value {
    find(view, name).unwrap_or_else(|| panic!("webhook {name} in {view}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_receiver_gets_every_completion_in_order_with_stable_ids_and_valid_signatures() {
    // The first three calls fail (503, 503 with Retry-After, a 500), then 2xx.
    let receiver = Receiver::start(Box::new(|n| match n {
        0 => (503, None),
        1 => (503, Some(1)),
        2 => (500, None),
        _ => (200, None),
    }))
    .await;
    let scenario = scenario(&webhook("hook", &receiver.url, "")).await;
    create(&scenario, 20, "w").await;
    wait_until(CONFIRMED_WITHIN, || async {
        receiver.delivered().len() >= 20
    })
    .await;

    let received = receiver.received();
    let delivered = receiver.delivered();
    assert_eq!(delivered.len(), 20, "each completion delivered once");
    // The three failures were attempts of the first event: same id, attempts 1..4.
    let first = &delivered[0];
    let retried: Vec<&str> = received[..3]
        .iter()
        .map(|r| r.delivery_id.as_str())
        .collect();
    assert_eq!(
        retried,
        vec![first.delivery_id.as_str(); 3],
        "same id across retries"
    );
    let attempts: Vec<u32> = received[..4].iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, vec![1, 2, 3, 4]);
    assert_eq!(received[3].delivery_id, first.delivery_id);
    // Signature over "<t>.<body>" with the secret, fresh per attempt.
    for r in &received {
        assert!(
            signature::verify(SECRET.as_bytes(), &r.signature, &r.body, now_unix(), 300),
            "signature of {} verifies",
            r.delivery_id
        );
        assert!(!signature::verify(
            b"wrong",
            &r.signature,
            &r.body,
            now_unix(),
            300
        ));
    }
    // In feed order (one submitter), every event CONFIRMED with its details.
    let cursors: Vec<FeedCursor> = delivered.iter().map(|r| cursor_of(&r.json)).collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "feed order: {cursors:?}"
    );
    let ids: HashSet<&str> = delivered.iter().map(|r| r.delivery_id.as_str()).collect();
    assert_eq!(ids.len(), 20, "one id per event");
    for r in &delivered {
        let event = &r.json;
        assert_eq!(event["state"], "CONFIRMED", "{event}");
        assert_eq!(event["webhook"], "hook");
        assert_eq!(event["chain_id"], 31337);
        assert_eq!(event["id"].as_str(), Some(r.delivery_id.as_str()));
        assert!(
            event["tx_hash"].as_str().is_some_and(|h| h.len() == 66),
            "{event}"
        );
        assert!(
            event["block_number"].is_u64() && event["nonce"].is_u64(),
            "{event}"
        );
        assert!(event["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with('w')));
    }
    // The receiver answers before the daemon records the delivery: wait for
    // the record, not just the request (a CI run read the view in between).
    let view = eventually(CONFIRMED_WITHIN, Duration::from_millis(100), || async {
        let view = ops_webhooks(&scenario).await;
        find(&view, "hook")
            .is_some_and(|s| s["delivered"] == 20 && s["lag_events"] == 0)
            .then_some(view)
    })
    .await;
    let status = status_of(&view, "hook");
    assert_eq!(status["delivered"], 20, "{view}");
    assert_eq!(status["failed_attempts"], 3, "{view}");
    assert_eq!(status["dead_letters"], 0, "{view}");
    assert_eq!(status["lease_live"], true, "{view}");
    assert_eq!(status["lag_events"], 0, "{view}");
    scenario.node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_and_exhausted_events_are_dead_lettered_redelivered_and_never_hold_back_others() {
    let refusing = Receiver::start(Box::new(|_| (400, None))).await;
    let failing = Receiver::start(Box::new(|_| (503, None))).await;
    let good = Receiver::always_ok().await;
    let hooks = [
        webhook("refusing", &refusing.url, "max_attempts = 5"),
        webhook("failing", &failing.url, "max_attempts = 2"),
        webhook("good", &good.url, "events = [\"CONFIRMED\"]"),
    ]
    .concat();
    let scenario = scenario(&hooks).await;
    create(&scenario, 5, "d").await;
    wait_until(CONFIRMED_WITHIN, || async { good.delivered().len() >= 5 }).await;
    let view = eventually(CONFIRMED_WITHIN, Duration::from_millis(100), || async {
        let view = ops_webhooks(&scenario).await;
        (find(&view, "refusing").is_some_and(|s| s["dead_letters"] == 5)
            && find(&view, "failing").is_some_and(|s| s["dead_letters"] == 5))
        .then_some(view)
    })
    .await;
    // 400 is not retried: one attempt each; 503 twice (max_attempts = 2).
    assert_eq!(refusing.received().len(), 5, "{view}");
    assert_eq!(failing.received().len(), 10, "{view}");
    assert_eq!(
        good.received().len(),
        5,
        "the good webhook was never held back"
    );
    for name in ["refusing", "failing"] {
        let status = status_of(&view, name);
        assert_eq!(
            status["lag_events"], 0,
            "the cursor moved past dead letters: {view}"
        );
        assert_eq!(status["delivered"], 0);
    }
    let letters = view["dead_letters"].as_array().expect("list");
    assert_eq!(letters.len(), 10, "{view}");
    let failing_letter = letters
        .iter()
        .find(|l| l["webhook"] == "failing")
        .expect("a failing letter");
    assert_eq!(failing_letter["attempts"], 2);
    assert_eq!(failing_letter["last_status"], 503);

    // Bad requests are 4xx with the field.
    let redeliver = |name: &str| format!("/v1/ops/webhooks/{name}/redeliver");
    let (status, body) = scenario
        .node
        .request("POST", &redeliver("refusing"), Some(serde_json::json!({})))
        .await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("all")),
        "{body}"
    );
    let (status, body) = scenario
        .node
        .request(
            "POST",
            &redeliver("nope"),
            Some(serde_json::json!({"all": true})),
        )
        .await;
    assert_eq!(status, 404, "{body}");

    // The receivers recover: one letter by id, then all the rest.
    refusing.set_policy(Box::new(|_| (200, None)));
    failing.set_policy(Box::new(|_| (204, None)));
    let one = failing_letter["id"].as_i64().expect("id");
    let (status, body) = scenario
        .node
        .request(
            "POST",
            &redeliver("failing"),
            Some(serde_json::json!({"id": one})),
        )
        .await;
    assert_eq!((status, body["queued"].as_u64()), (200, Some(1)), "{body}");
    wait_until(CONFIRMED_WITHIN, || async {
        failing.delivered().len() == 1
    })
    .await;
    assert_eq!(
        failing.delivered()[0].delivery_id,
        failing_letter["delivery_id"].as_str().expect("id"),
        "a redelivery keeps its delivery id"
    );
    for name in ["failing", "refusing"] {
        let (status, body) = scenario
            .node
            .request(
                "POST",
                &redeliver(name),
                Some(serde_json::json!({"all": true})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    wait_until(CONFIRMED_WITHIN, || async {
        refusing.delivered().len() == 5 && failing.delivered().len() == 5
    })
    .await;
    wait_until(CONFIRMED_WITHIN, || async {
        ops_webhooks(&scenario).await["dead_letters"]
            .as_array()
            .is_some_and(Vec::is_empty)
    })
    .await;
    assert_eq!(
        scenario
            .db
            .count("SELECT count(*) FROM ops_audit WHERE action = 'redeliver' AND outcome = 'done'")
            .await,
        3,
        "every redeliver is audited"
    );
    scenario.node.stop().await;
}

mod lifecycle;
