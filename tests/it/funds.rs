//! Funds monitoring end to end (README "Funds"): two in-process nodes on one
//! database and anvil, `anvil_setBalance` moving a submitter across its
//! `min_balance`. Each crossing is reported once (feed and webhook) however
//! many nodes run and however the lease moves; a top-up is sent once per
//! crossing by the funder, confirmed, and capped per rolling day.

use std::time::Duration;

use serde_json::{json, Value};
use txmgr_testkit::Anvil;

use crate::common::{
    daemon::DEV_KEYS,
    node::{config_toml, TestNode},
    receiver::Receiver,
    transfer, wait_until, TestDb, DEV,
};

const ETH: u128 = 1_000_000_000_000_000_000;
const FUNDER_VAR: &str = "TXMGR_TEST_FUNDER_KEY";
const HOOK_SECRET_VAR: &str = "TXMGR_FUNDS_HOOK_SECRET";
const WITHIN: Duration = Duration::from_secs(60);

/// The funder: dev account 1.
fn funder() -> &'static str {
    DEV_KEYS[1].1
}

/// A node leading the dev submitter (watched, maybe topped up by the
/// funder) and the funder, both kept led while idle.
fn config(db: &TestDb, anvil: &Anvil, node_id: &str, dev_extra: &str, hook_url: &str) -> String {
    let base = config_toml(
        &db.url,
        &anvil.rpc_url(),
        node_id,
        &format!("min_balance = \"{ETH}\"\nfinality = {{ confirmations = 1 }}\n{dev_extra}"),
    );
    format!(
        "{base}\n[submitters.\"{funder}\"]\nsigner = {{ kind = \"env\", env = \"{FUNDER_VAR}\" }}\n\
         finality = {{ confirmations = 1 }}\nreject_after = \"1s\"\n\
         [[webhooks]]\nname = \"funds\"\nurl = \"{hook_url}\"\nsecret_env = \"{HOOK_SECRET_VAR}\"\n\
         events = [\"LOW_BALANCE\", \"BALANCE_RESTORED\"]\nbackoff_initial = \"50ms\"\nstart_at = \"beginning\"\n",
        funder = funder(),
    )
}

async fn two_nodes(dev_extra: &str) -> (TestDb, Anvil, Receiver, TestNode, TestNode) {
    std::env::set_var(FUNDER_VAR, DEV_KEYS[1].0);
    std::env::set_var(HOOK_SECRET_VAR, "funds-secret");
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let receiver = Receiver::always_ok().await;
    let n1 = TestNode::start(&config(&db, &anvil, "n1", dev_extra, &receiver.url)).await;
    let n2 = TestNode::start(&config(&db, &anvil, "n2", dev_extra, &receiver.url)).await;
    (db, anvil, receiver, n1, n2)
}

async fn set_balance(anvil: &Anvil, address: &str, wei: u128) {
    anvil
        .rpc("anvil_setBalance", json!([address, format!("{wei:#x}")]))
        .await;
}

async fn funds_events(db: &TestDb, event: &str) -> i64 {
    db.count(&format!(
        "SELECT count(*) FROM tx_completion WHERE submitter = '{DEV}' AND state = '{event}'"
    ))
    .await
}

/// Funds events the webhook received, in order.
fn hooked(receiver: &Receiver) -> Vec<String> {
    receiver
        .delivered()
        .iter()
        .map(|r| r.json["state"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Funds events the webhook received, in order of first arrival (a
/// delivery id seen again is a redelivery).
fn first_arrivals(receiver: &Receiver) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    receiver
        .delivered()
        .iter()
        .filter(|r| seen.insert(r.delivery_id.clone()))
        .map(|r| r.json["state"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits until `node`'s leader of the dev submitter has read `balance`
/// (the ops view shows the last read).
async fn read_again(node: &TestNode, balance: u128) {
    wait_until(WITHIN, || async {
        let (_, body) = node.request("GET", "/v1/ops/actors", None).await;
        body["submitters"].as_array().is_some_and(|subs| {
            subs.iter()
                .any(|s| s["submitter"] == DEV && s["balance_wei"] == balance.to_string())
        })
    })
    .await;
}

/// The node whose dev actor leads, if one does now.
async fn leader(db: &TestDb) -> Option<String> {
    sqlx::query_scalar(
        "SELECT owner_node FROM submitter_lease WHERE submitter = $1 AND expires_at > now()",
    )
    .bind(DEV)
    .fetch_optional(&db.pool)
    .await
    .expect("lease row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crossing_is_reported_once_with_two_nodes_even_across_a_change_of_leader() {
    let (db, anvil, receiver, n1, n2) = two_nodes("").await;
    // Led while idle: no intent needed for the funds to be watched.
    wait_until(WITHIN, || async {
        db.count(&format!(
            "SELECT count(*) FROM submitter_lease WHERE submitter = '{DEV}' AND expires_at > now()"
        ))
        .await
            == 1
    })
    .await;

    set_balance(&anvil, DEV, ETH / 2).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "LOW_BALANCE").await == 1
    })
    .await;
    // Further sweeps, and the other node taking over, report nothing new.
    // (Balancing may be handing the lease over right now: wait for a holder.)
    wait_until(WITHIN, || async { leader(&db).await.is_some() }).await;
    let first = leader(&db).await.expect("a leader");
    let (stay, gone) = if first == "n1" { (n2, n1) } else { (n1, n2) };
    gone.stop().await;
    wait_until(WITHIN, || async {
        leader(&db).await.is_some_and(|now| now != first)
    })
    .await;
    read_again(&stay, ETH / 2).await;
    assert_eq!(
        funds_events(&db, "LOW_BALANCE").await,
        1,
        "once per crossing"
    );

    set_balance(&anvil, DEV, 3 * ETH).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "BALANCE_RESTORED").await == 1
    })
    .await;
    read_again(&stay, 3 * ETH).await;
    assert_eq!(funds_events(&db, "BALANCE_RESTORED").await, 1);
    assert_eq!(funds_events(&db, "LOW_BALANCE").await, 1);

    // The feed serves them with `funds=true` only; the webhook got both, in
    // order. Committed is not yet served: the feed holds rows back while any
    // older transaction on the server (another test's, in a full run) is
    // open (README "Completion feed": delayed, never wrong), so poll.
    let funds_page = || async {
        let (status, page) = stay
            .request("GET", "/v1/completions?funds=true", None)
            .await;
        assert_eq!(status, 200, "{page}");
        page
    };
    wait_until(WITHIN, || async {
        funds_page().await["items"].as_array().map(Vec::len) == Some(2)
    })
    .await;
    let page = funds_page().await;
    let items: Vec<&Value> = page["items"].as_array().expect("items").iter().collect();
    let states: Vec<&str> = items.iter().filter_map(|i| i["state"].as_str()).collect();
    assert_eq!(states, vec!["LOW_BALANCE", "BALANCE_RESTORED"], "{page}");
    assert_eq!(items[0]["balance_wei"], (ETH / 2).to_string());
    assert_eq!(items[0]["min_balance_wei"], ETH.to_string());
    assert!(items[0]["tx_id"].is_null());
    let (_, plain) = stay.request("GET", "/v1/completions", None).await;
    assert_eq!(plain["items"].as_array().map(Vec::len), Some(0), "{plain}");
    assert_eq!(
        plain["next_after"], page["next_after"],
        "the cursor still moves past them"
    );
    // At least once (README "Webhooks"): the node stopped above may have had
    // LOW_BALANCE's attempt in flight, unbooked; then the new holder sends it
    // again, with the same delivery id. Each event arrives, in order, and
    // only that one may repeat.
    wait_until(WITHIN, || async { first_arrivals(&receiver).len() == 2 }).await;
    assert_eq!(
        first_arrivals(&receiver),
        vec!["LOW_BALANCE", "BALANCE_RESTORED"],
        "{:?}",
        hooked(&receiver)
    );
    assert!(hooked(&receiver).len() <= 3, "{:?}", hooked(&receiver));
    stay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_low_submitter_is_topped_up_once_per_crossing_within_the_daily_cap() {
    let top_up = format!(
        "top_up = {{ from = \"{}\", target = \"{}\", max_per_day = \"{}\" }}",
        funder(),
        3 * ETH,
        4 * ETH
    );
    let (db, anvil, receiver, n1, n2) = two_nodes(&top_up).await;
    let top_ups = || async {
        db.count(&format!(
            "SELECT count(*) FROM managed_tx WHERE submitter = '{}' AND request_id LIKE 'txmgr-top-up:%'",
            funder()
        ))
        .await
    };
    let confirmed_top_ups = || async {
        db.count(&format!(
            "SELECT count(*) FROM managed_tx WHERE submitter = '{}' AND request_id LIKE 'txmgr-top-up:%' \
             AND state = 'CONFIRMED'",
            funder()
        ))
        .await
    };

    // Crossing 1: 0.5 ETH → a top-up of 2.5 ETH, confirmed, then restored.
    set_balance(&anvil, DEV, ETH / 2).await;
    wait_until(WITHIN, || async { confirmed_top_ups().await == 1 }).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "BALANCE_RESTORED").await == 1
    })
    .await;
    assert_eq!(top_ups().await, 1, "exactly one top-up for the crossing");
    let value: String =
        sqlx::query_scalar("SELECT value_wei::text FROM funds_top_up WHERE request_id = $1")
            .bind(format!("txmgr-top-up:{DEV}:1"))
            .fetch_one(&db.pool)
            .await
            .expect("top-up row");
    assert_eq!(value, (5 * ETH / 2).to_string());

    // Crossing 2: only 1.5 ETH of the 4 ETH cap is left.
    set_balance(&anvil, DEV, ETH / 2).await;
    wait_until(WITHIN, || async { confirmed_top_ups().await == 2 }).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "BALANCE_RESTORED").await == 2
    })
    .await;
    let total: String =
        sqlx::query_scalar("SELECT sum(value_wei)::text FROM funds_top_up WHERE submitter = $1")
            .bind(DEV)
            .fetch_one(&db.pool)
            .await
            .expect("sum");
    assert_eq!(total, (4 * ETH).to_string(), "capped at max_per_day");

    // Crossing 3: the cap is used up: LOW, no top-up, an audited refusal.
    set_balance(&anvil, DEV, ETH / 2).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "LOW_BALANCE").await == 3
    })
    .await;
    wait_until(WITHIN, || async {
        db.count("SELECT count(*) FROM ops_audit WHERE action = 'top_up' AND outcome = 'failed'")
            .await
            == 1
    })
    .await;
    assert_eq!(top_ups().await, 2, "no top-up beyond the daily cap");
    assert_eq!(
        db.count("SELECT count(*) FROM ops_audit WHERE action = 'top_up' AND outcome = 'done'")
            .await,
        2,
        "every top-up is audited"
    );
    // The top-ups are ordinary intents: in the feed under their request ids.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM tx_completion WHERE request_id LIKE 'txmgr-top-up:%' AND state = 'CONFIRMED'"
        )
        .await,
        2
    );
    wait_until(WITHIN, || async { hooked(&receiver).len() == 5 }).await;
    // The dev submitter still works while low.
    let (status, body) = n1
        .request("POST", "/v1/transactions", Some(transfer("after")))
        .await;
    assert_eq!(status, 202, "{body}");
    n1.stop().await;
    n2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_top_up_that_fails_is_sent_again_while_the_submitter_stays_low() {
    let top_up = format!(
        "top_up = {{ from = \"{}\", target = \"{}\", max_per_day = \"{}\" }}",
        funder(),
        3 * ETH,
        10 * ETH
    );
    let (db, anvil, _receiver, n1, n2) = two_nodes(&top_up).await;
    let top_up_states = || async {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT t.request_id, m.state FROM funds_top_up t JOIN managed_tx m USING (tx_id)
              ORDER BY t.created_at",
        )
        .fetch_all(&db.pool)
        .await
        .expect("top-ups");
        rows
    };
    // The funder cannot pay: its first top-up is refused and REJECTED.
    set_balance(&anvil, funder(), 0).await;
    set_balance(&anvil, DEV, ETH / 2).await;
    wait_until(WITHIN, || async {
        top_up_states()
            .await
            .first()
            .is_some_and(|(_, state)| state == "REJECTED")
    })
    .await;
    // Funded again: the next check sends another top-up for the same crossing.
    set_balance(&anvil, funder(), 100 * ETH).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "BALANCE_RESTORED").await == 1
    })
    .await;
    // The balance is read at `latest`: the restore can be recorded before
    // the top-up is final, so its CONFIRMED is waited for on its own.
    wait_until(WITHIN, || async {
        top_up_states()
            .await
            .get(1)
            .is_some_and(|(_, state)| state == "CONFIRMED")
    })
    .await;
    let states = top_up_states().await;
    assert_eq!(states.len(), 2, "{states:?}");
    assert_eq!(states[0].0, format!("txmgr-top-up:{DEV}:1"));
    assert_eq!(
        states[1],
        (format!("txmgr-top-up:{DEV}:1:1"), "CONFIRMED".to_owned())
    );
    assert_eq!(funds_events(&db, "LOW_BALANCE").await, 1, "one crossing");
    n1.stop().await;
    n2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_top_up_request_id_cannot_be_taken_ahead_of_the_engine() {
    let top_up = format!(
        "top_up = {{ from = \"{}\", target = \"{}\", max_per_day = \"{}\" }}",
        funder(),
        3 * ETH,
        10 * ETH
    );
    let (db, anvil, _receiver, n1, n2) = two_nodes(&top_up).await;
    let first = format!("txmgr-top-up:{DEV}:1");
    // A client that may use the funder cannot create under the engine's ids,
    // neither in the body nor through the Idempotency-Key header.
    let hijack = json!({"submitter": funder(), "request_id": first, "to": DEV, "value": "1"});
    let (status, body) = n1.request("POST", "/v1/transactions", Some(hijack)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "request_id", "{body}");
    let filler = json!({"submitter": funder(), "request_id": "filler:7", "to": DEV});
    let (status, body) = n1.request("POST", "/v1/transactions", Some(filler)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "request_id", "{body}");

    // An id held already (as one taken before the prefixes were reserved:
    // created, then cancelled) is not mistaken for the engine's top-up: the
    // crossing's top-up goes out under the next id and funds the submitter.
    sqlx::query(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent, state)
         VALUES (gen_random_uuid(), 31337, $1, $2, decode(repeat('00', 32), 'hex'), '{}'::jsonb, 'CANCELLED')",
    )
    .bind(funder())
    .bind(&first)
    .execute(&db.pool)
    .await
    .expect("the squatting intent");
    set_balance(&anvil, DEV, ETH / 2).await;
    wait_until(WITHIN, || async {
        funds_events(&db, "BALANCE_RESTORED").await == 1
    })
    .await;
    let top_ups = || async {
        sqlx::query_as::<_, (String, String)>(
            "SELECT t.request_id, m.state FROM funds_top_up t JOIN managed_tx m USING (tx_id)",
        )
        .fetch_all(&db.pool)
        .await
        .expect("top-ups")
    };
    // The restore can be recorded before the top-up is final (as above).
    wait_until(WITHIN, || async {
        top_ups()
            .await
            .iter()
            .all(|(_, state)| state == "CONFIRMED")
    })
    .await;
    let rows = top_ups().await;
    assert_eq!(rows, vec![(format!("{first}:1"), "CONFIRMED".to_owned())]);
    n1.stop().await;
    n2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_top_up_the_funders_policy_refuses_is_an_audited_failed_top_up() {
    std::env::set_var(FUNDER_VAR, DEV_KEYS[1].0);
    std::env::set_var(HOOK_SECRET_VAR, "funds-secret");
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let receiver = Receiver::always_ok().await;
    let top_up = format!(
        "top_up = {{ from = \"{}\", target = \"{}\", max_per_day = \"{}\" }}",
        funder(),
        3 * ETH,
        4 * ETH
    );
    // The funder may only pay the sink: not the submitter it funds.
    let toml = config(&db, &anvil, "n1", &top_up, &receiver.url)
        + "\n[defaults.policy]\nallowed_to = [\"0x000000000000000000000000000000000000dead\"]\n";
    let node = TestNode::start(&toml).await;
    set_balance(&anvil, DEV, ETH / 2).await;
    db.wait_count(
        &format!(
            "SELECT count(*) FROM ops_audit WHERE action = 'top_up' AND outcome = 'failed'
               AND submitter = '{DEV}' AND reason LIKE '%policy_violation%allowed_to%'"
        ),
        1,
    )
    .await;
    assert!(
        db.count(&format!(
            "SELECT count(*) FROM managed_tx WHERE submitter = '{}' AND request_id LIKE 'txmgr-top-up:%'
               AND state = 'REJECTED' AND nonce IS NULL AND last_error LIKE 'policy_violation%'",
            funder()
        ))
        .await
            >= 1
    );
    node.stop().await;
}
