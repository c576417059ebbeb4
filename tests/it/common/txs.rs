//! Reading intents and their attempts straight from the database, for the
//! resubmission and operator-action tests.

use std::time::Duration;

use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use super::{node::TestNode, wait_until, DevNode};

/// One gwei in wei.
pub(crate) const GWEI: u128 = 1_000_000_000;

/// A transfer recipient (anvil dev account 1).
pub(crate) const TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// A 21,000-gas transfer of `value` wei to [`TO`] at the market's fees,
/// as the store-level tests queue it.
pub(crate) fn transfer_intent(value: u64) -> txmgr_actors::domain::Intent {
    txmgr_actors::domain::Intent {
        to: Some(TO.parse().expect("address")),
        value: alloy::primitives::U256::from(value),
        data: Default::default(),
        gas_limit: Some(21_000),
        max_fee_per_gas: None,
        max_priority_fee_per_gas: None,
        private: false,
        valid_until: None,
    }
}

/// One row of `tx_attempt`.
#[derive(Debug, Clone)]
pub(crate) struct AttemptRow {
    pub(crate) attempt_no: i32,
    pub(crate) nonce: i64,
    pub(crate) tx_hash: String,
    pub(crate) kind: String,
    pub(crate) max_fee: u128,
    pub(crate) priority_fee: u128,
    pub(crate) result: Option<String>,
    /// Milliseconds since the epoch, database clock.
    pub(crate) created_ms: i64,
    pub(crate) raw: Vec<u8>,
}

/// Every attempt of an intent, oldest first.
pub(crate) async fn attempts(pool: &PgPool, tx_id: Uuid) -> Vec<AttemptRow> {
    type Row = (
        i32,
        i64,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        i64,
        Vec<u8>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT t.attempt_no, t.nonce, t.tx_hash, t.kind,
                COALESCE(t.max_fee_per_gas, t.gas_price)::text,
                COALESCE(t.max_priority_fee_per_gas, t.gas_price)::text,
                COALESCE(t.broadcast_result,
                         CASE WHEN t.tx_hash = m.accepted_hash THEN 'accepted' END),
                (EXTRACT(EPOCH FROM t.created_at) * 1000)::bigint, t.raw_tx
           FROM tx_attempt t JOIN managed_tx m ON m.tx_id = t.tx_id
          WHERE t.tx_id = $1 ORDER BY t.attempt_no",
    )
    .bind(tx_id)
    .fetch_all(pool)
    .await
    .expect("attempts");
    rows.into_iter()
        .map(|r| AttemptRow {
            attempt_no: r.0,
            nonce: r.1,
            tx_hash: r.2,
            kind: r.3,
            max_fee: r.4.and_then(|v| v.parse().ok()).unwrap_or(0),
            priority_fee: r.5.and_then(|v| v.parse().ok()).unwrap_or(0),
            result: r.6,
            created_ms: r.7,
            raw: r.8,
        })
        .collect()
}

/// The intent's state, sub-state, nonce and mined hash.
#[derive(Debug, Clone)]
pub(crate) struct IntentRow {
    pub(crate) state: String,
    pub(crate) sub_state: Option<String>,
    pub(crate) nonce: Option<i64>,
    pub(crate) mined_tx_hash: Option<String>,
    pub(crate) last_error: Option<String>,
}

/// Reads one intent.
pub(crate) async fn intent(pool: &PgPool, tx_id: Uuid) -> IntentRow {
    let row: (String, Option<String>, Option<i64>, Option<String>, Option<String>) =
        sqlx::query_as(
            "SELECT state, sub_state, nonce, mined_tx_hash, last_error FROM managed_tx WHERE tx_id = $1",
        )
        .bind(tx_id)
        .fetch_one(pool)
        .await
        .expect("intent");
    IntentRow {
        state: row.0,
        sub_state: row.1,
        nonce: row.2,
        mined_tx_hash: row.3,
        last_error: row.4,
    }
}

/// Waits until the intent is in `state`.
#[track_caller]
pub(crate) fn wait_state<'a>(
    pool: &'a PgPool,
    tx_id: Uuid,
    state: &'a str,
    timeout: Duration,
) -> impl std::future::Future<Output = ()> + 'a {
    wait_until(timeout, move || async move {
        intent(pool, tx_id).await.state == state
    })
}

/// Waits until the intent is STUCK after `max_resubmits`, then checks that
/// its reason mentions `reason` and that exactly one STUCK completion row
/// was written: a stop with its reason, not a silent retry loop.
pub(crate) async fn expect_stuck_after_resubmits(
    pool: &PgPool,
    tx_id: Uuid,
    reason: &str,
    timeout: Duration,
) {
    wait_state(pool, tx_id, "STUCK", timeout).await;
    let stuck = intent(pool, tx_id).await;
    assert_eq!(stuck.sub_state.as_deref(), Some("stuck_max_resubmits"));
    assert!(
        stuck
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains(reason)),
        "{stuck:?}"
    );
    assert_eq!(completion_states(pool, tx_id).await, ["STUCK"]);
}

/// The completion rows of an intent, in feed order.
pub(crate) async fn completion_states(pool: &PgPool, tx_id: Uuid) -> Vec<String> {
    sqlx::query_scalar("SELECT state FROM tx_completion WHERE tx_id = $1 ORDER BY seq")
        .bind(tx_id)
        .fetch_all(pool)
        .await
        .expect("completions")
}

/// Creates a transfer of `value` wei to [`TO`] with a request id; returns its id.
pub(crate) async fn create_transfer(node: &TestNode, request_id: &str, value: u64) -> Uuid {
    let (status, answer) = node
        .request(
            "POST",
            "/v1/transactions",
            Some(json!({
                "submitter": super::DEV_ADDRESS_0,
                "request_id": request_id,
                "to": TO,
                "value": value.to_string(),
            })),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    answer["tx_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("tx_id")
}

/// Whether the node's pool (or chain) knows a transaction hash.
pub(crate) async fn known_to_node(chain: &impl DevNode, hash: &str) -> bool {
    !chain
        .rpc("eth_getTransactionByHash", json!([hash]))
        .await
        .is_null()
}

/// `<anvil|hardhat>_setNextBlockBaseFeePerGas`.
pub(crate) async fn set_next_base_fee(chain: &impl DevNode, wei: u128) {
    chain.set_next_base_fee(wei).await;
}

/// `0x`-hex of raw bytes, for `eth_sendRawTransaction`.
pub(crate) fn raw_hex(raw: &[u8]) -> String {
    format!("0x{}", hex::encode(raw))
}

/// Calls an operator action; returns status and body.
pub(crate) async fn action(
    node: &TestNode,
    tx_id: Uuid,
    action: &str,
    body: Option<Value>,
) -> (u16, Value) {
    node.request("POST", &format!("/v1/transactions/{tx_id}/{action}"), body)
        .await
}

/// Creates a transfer over real HTTP (a daemon process); returns its id.
pub(crate) async fn create_transfer_at(
    client: &reqwest::Client,
    base: &str,
    request_id: &str,
) -> Uuid {
    // The daemon may still be starting: retry until it answers 202.
    let answer: Value =
        super::eventually(Duration::from_secs(30), Duration::from_millis(100), || {
            let request = client.post(format!("{base}/v1/transactions")).json(&json!({
                "submitter": super::DEV_ADDRESS_0,
                "request_id": request_id,
                "to": TO,
                "value": "1",
            }));
            async move {
                let response = request.send().await.ok()?;
                if response.status().as_u16() != 202 {
                    return None;
                }
                response.json().await.ok()
            }
        })
        .await;
    answer["tx_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("tx_id")
}
