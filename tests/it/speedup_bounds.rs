//! Fee escalation by clients is bounded (README "Resubmission, fee bumps,
//! STUCK and cancel"): a `client` token speeds one intent up at most once per
//! resubmit interval (429 `rate_limited` with `Retry-After`, nothing done),
//! an `ops` token is not bounded, and fees stay under the default cap
//! whatever a client asks for.

use std::time::Duration;

use crate::common::{
    node::{config_toml, TestNode},
    txs::{attempts, wait_state},
    wait_until, Anvil, TestDb, DEV,
};
use serde_json::json;
use txmgr::http::auth::token_hash_hex;

const CLIENT: &str = "speedup-client-token";
const OPS: &str = "speedup-ops-token";
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_speeds_an_intent_up_once_per_resubmit_interval() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--no-mining"]).await;
    let toml = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        "resubmit_interval = \"1h\"\nmax_in_flight = 1",
    ) + &format!(
        "[[auth.tokens]]\nname = \"svc\"\nrole = \"client\"\nsha256 = \"{}\"\n\
         [[auth.tokens]]\nname = \"ops\"\nrole = \"ops\"\nsha256 = \"{}\"\n",
        token_hash_hex(CLIENT),
        token_hash_hex(OPS)
    );
    let node = TestNode::start(&toml).await;
    // A client asks for an absurd priority fee: it is clamped to the cap.
    let (status, created) = node
        .request_as(
            Some(CLIENT),
            "POST",
            "/v1/transactions",
            Some(
                json!({"submitter": DEV, "request_id": "greedy", "to": DEV, "value": "1",
                "max_fee_per_gas": (u128::MAX / 2).to_string(),
                "max_priority_fee_per_gas": (u128::MAX / 2).to_string()}),
            ),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let tx_id: uuid::Uuid = created["tx_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("tx_id");
    wait_state(&db.pool, tx_id, "TRACKING", WAIT).await;
    let cap = txmgr_actors::submitter::settings::DEFAULT_MAX_FEE_PER_GAS_CAP;
    let first = attempts(&db.pool, tx_id).await[0].clone();
    assert!(
        first.max_fee <= cap && first.priority_fee <= cap,
        "{first:?}"
    );

    let speedup = format!("/v1/transactions/{tx_id}/speedup");
    let (status, body) = node.request_as(Some(CLIENT), "POST", &speedup, None).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = node.request_as(Some(CLIENT), "POST", &speedup, None).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ops_audit WHERE tx_id = $1 AND action = 'tx_speedup'",
    )
    .bind(tx_id)
    .fetch_one(&db.pool)
    .await
    .expect("audit");
    assert_eq!(audited, 1, "the refused speed-up did nothing");
    // An operator may.
    let (status, body) = node.request_as(Some(OPS), "POST", &speedup, None).await;
    assert_eq!(status, 202, "{body}");
    // Once the leader has acted on both: no attempt goes above the cap
    // (here already at it, the speed-ups re-broadcast: fee_cap_reached).
    wait_until(WAIT, || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT requested_action IS NULL FROM managed_tx WHERE tx_id = $1",
        )
        .bind(tx_id)
        .fetch_one(&db.pool)
        .await
        .unwrap_or(false)
    })
    .await;
    for attempt in attempts(&db.pool, tx_id).await {
        assert!(attempt.max_fee <= cap, "{attempt:?}");
    }
    node.stop().await;
}
