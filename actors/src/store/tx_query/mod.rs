//! Read-only queries behind the HTTP API's `GET /v1/transactions…`
//! (README "HTTP API"). Plain pool reads: nothing here is a critical write,
//! so nothing is fenced, and a reader on any node sees the committed truth.

use std::{fmt, str::FromStr};

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

mod detail;
mod list;

use super::{StoreError, StoreResult};
use crate::domain::{ChainId, Intent, SubState, SubmitterKey, TxState};
pub use detail::{
    detail, find_by_attempt_hash, AttemptView, AuditView, DeadLetterView, FeedRowView, TxDetail,
    AUDIT_ROWS_SHOWN,
};
pub use list::{list, list_within};
/// What the reads answer, as the API defines it.
pub use txmgr_api::{ReceiptView, TxView};

/// Position in a submitter's listing (the last `ingress_seq` served). Clients
/// see it as an opaque string: [`fmt::Display`] writes it, [`FromStr`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor(i64);

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A cursor string this store did not hand out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor {0:?}")]
pub struct InvalidCursor(pub String);

impl FromStr for Cursor {
    type Err = InvalidCursor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Digits only: `i64::from_str` would also take a sign.
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidCursor(s.to_owned()));
        }
        s.parse::<i64>()
            .map(Cursor)
            .map_err(|_| InvalidCursor(s.to_owned()))
    }
}

/// A `managed_tx` row as every query here selects it (the `query_as!`
/// macros take only literals, so each query spells the columns out).
struct TxRow {
    chain_id: ChainId,
    tx_id: Uuid,
    submitter: String,
    request_id: Option<String>,
    state: String,
    sub_state: Option<SubState>,
    nonce: Option<i64>,
    tx_hash: Option<String>,
    mined_tx_hash: Option<String>,
    intent: serde_json::Value,
    last_error: Option<String>,
    receipt: Option<serde_json::Value>,
    receipt_block_number: Option<i64>,
    receipt_block_hash: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    confirmed_at: Option<DateTime<Utc>>,
    ingress_seq: i64,
    attempts: i64,
}

impl TxRow {
    fn into_view(self) -> StoreResult<TxView> {
        let state = self
            .state
            .parse::<TxState>()
            .map_err(|e| StoreError::Corrupt(format!("tx {}: {e}", self.tx_id)))?;
        let intent: Intent = serde_json::from_value(self.intent)
            .map_err(|e| StoreError::Corrupt(format!("tx {}: intent: {e}", self.tx_id)))?;
        let nonce = self
            .nonce
            .map(u64::try_from)
            .transpose()
            .map_err(|_| StoreError::Corrupt(format!("tx {}: negative nonce", self.tx_id)))?;
        let receipt = match (
            self.receipt,
            self.receipt_block_number,
            self.receipt_block_hash,
        ) {
            (Some(json), Some(number), Some(hash)) => Some(ReceiptView {
                block_number: u64::try_from(number).map_err(|_| {
                    StoreError::Corrupt(format!("tx {}: negative block number", self.tx_id))
                })?,
                block_hash: hash,
                status: receipt_status(json.get("status")),
                gas_used: quantity(json.get("gasUsed")).and_then(|v| u64::try_from(v).ok()),
                effective_gas_price: quantity(json.get("effectiveGasPrice")).map(|v| v.to_string()),
            }),
            // The schema stores a receipt whole or not at all.
            _ => None,
        };
        Ok(TxView {
            chain_id: self.chain_id.get(),
            tx_id: self.tx_id,
            submitter: self.submitter,
            request_id: self.request_id,
            state,
            sub_state: self.sub_state,
            nonce,
            tx_hash: self.tx_hash,
            mined_tx_hash: self.mined_tx_hash,
            to: intent.to.map(|to| format!("{to:#x}")),
            value: intent.value.to_string(),
            data: intent.data.to_string(),
            attempts: self.attempts,
            last_error: self.last_error,
            receipt,
            confirmations: None,
            created_at: self.created_at,
            updated_at: self.updated_at,
            confirmed_at: self.confirmed_at,
        })
    }
}

/// Reads an Ethereum JSON-RPC quantity leniently: a `0x` hex string (what
/// alloy writes), a decimal string, or a JSON integer.
fn quantity(value: Option<&serde_json::Value>) -> Option<U256> {
    match value? {
        serde_json::Value::String(s) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))
        {
            Some(hex) if !hex.is_empty() => U256::from_str_radix(hex, 16).ok(),
            Some(_) => None,
            None => U256::from_str_radix(s, 10).ok(),
        },
        serde_json::Value::Number(n) => n.as_u64().map(U256::from),
        _ => None,
    }
}

/// Reads a receipt status: `"0x1"`/`"0x0"` as alloy writes it, or a boolean.
fn receipt_status(value: Option<&serde_json::Value>) -> Option<u8> {
    if let Some(serde_json::Value::Bool(ok)) = value {
        return Some(u8::from(*ok));
    }
    match quantity(value)? {
        v if v == U256::ZERO => Some(0),
        v if v == U256::from(1u8) => Some(1),
        _ => None,
    }
}

/// One transaction by id, on one of `chain_ids` when given, else on any
/// chain (the API reads every chain's rows: an intent of a chain a reload
/// removed stays readable); `None` if there is none.
pub async fn get(
    pool: &PgPool,
    chain_ids: Option<&[ChainId]>,
    tx_id: Uuid,
) -> StoreResult<Option<TxView>> {
    let row = sqlx::query_as!(
        TxRow,
        r#"SELECT m.chain_id AS "chain_id: ChainId", m.tx_id, m.submitter, m.request_id, m.state, CASE WHEN m.state = 'QUEUED' AND EXISTS (
                      SELECT 1 FROM submitter_pause p
                       WHERE p.chain_id = m.chain_id AND p.submitter = m.submitter)
                  THEN 'paused' ELSE m.sub_state END AS "sub_state?: SubState",
                  m.nonce, m.tx_hash, m.mined_tx_hash, m.intent, m.last_error, m.receipt,
                  m.receipt_block_number, m.receipt_block_hash, m.created_at, m.updated_at,
                  m.confirmed_at, m.ingress_seq,
                  (SELECT count(*) FROM tx_attempt a WHERE a.tx_id = m.tx_id) AS "attempts!"
             FROM managed_tx m
            WHERE m.tx_id = $1 AND ($2::bigint[] IS NULL OR m.chain_id = ANY($2))"#,
        tx_id,
        chain_ids as _,
    )
    .fetch_optional(pool)
    .await?;
    row.map(TxRow::into_view).transpose()
}

/// The submitter's transaction with this idempotency key, if any.
pub async fn find_by_request_id(
    pool: &PgPool,
    submitter: SubmitterKey,
    request_id: &str,
) -> StoreResult<Option<TxView>> {
    if submitter.chain_id.to_db().is_err() {
        // No row carries a chain id above BIGINT; binding one would fail
        // (callers may pass any chain id, served here or not).
        return Ok(None);
    }
    let row = sqlx::query_as!(
        TxRow,
        r#"SELECT m.chain_id AS "chain_id: ChainId", m.tx_id, m.submitter, m.request_id, m.state,
                  CASE WHEN m.state = 'QUEUED' AND EXISTS (
                      SELECT 1 FROM submitter_pause p
                       WHERE p.chain_id = m.chain_id AND p.submitter = m.submitter)
                  THEN 'paused' ELSE m.sub_state END AS "sub_state?: SubState",
                  m.nonce, m.tx_hash, m.mined_tx_hash, m.intent, m.last_error, m.receipt,
                  m.receipt_block_number, m.receipt_block_hash, m.created_at, m.updated_at,
                  m.confirmed_at, m.ingress_seq,
                  (SELECT count(*) FROM tx_attempt a WHERE a.tx_id = m.tx_id) AS "attempts!"
             FROM managed_tx m
            WHERE m.chain_id = $1 AND m.submitter = $2 AND m.request_id = $3"#,
        submitter.chain_id as _,
        submitter.address_hex(),
        request_id,
    )
    .fetch_optional(pool)
    .await?;
    row.map(TxRow::into_view).transpose()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quantities_are_read_leniently() {
        assert_eq!(quantity(Some(&json!("0x5208"))), Some(U256::from(21000u64)));
        assert_eq!(quantity(Some(&json!("21000"))), Some(U256::from(21000u64)));
        assert_eq!(quantity(Some(&json!(21000))), Some(U256::from(21000u64)));
        assert_eq!(quantity(Some(&json!("0x"))), None);
        assert_eq!(quantity(Some(&json!("zz"))), None);
        assert_eq!(quantity(Some(&json!(null))), None);
        assert_eq!(quantity(None), None);
    }

    #[test]
    fn receipt_status_accepts_hex_and_bool() {
        assert_eq!(receipt_status(Some(&json!("0x1"))), Some(1));
        assert_eq!(receipt_status(Some(&json!("0x0"))), Some(0));
        assert_eq!(receipt_status(Some(&json!(true))), Some(1));
        assert_eq!(receipt_status(Some(&json!("0x2"))), None);
        assert_eq!(receipt_status(None), None);
    }

    #[test]
    fn cursor_round_trips_and_refuses_foreign_strings() {
        let cursor: Cursor = "42".parse().expect("digits are a cursor");
        assert_eq!(cursor.to_string(), "42");
        for bad in ["", "-1", "+1", "abc", "99999999999999999999"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad:?} accepted");
        }
    }
}
