//! What a service asks for: an intent, before txmgr chose nonce and timing.

use alloy::primitives::{keccak256, Address, Bytes, B256, U256};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{SubmitterKey, TxState};

/// The transaction a service wants executed. Stored as JSONB in
/// `managed_tx.intent`; everything else (nonce, fees when not given, gas when
/// not given) is txmgr's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Recipient; `None` deploys a contract.
    pub to: Option<Address>,
    /// Wei to send.
    pub value: U256,
    /// Call data (or init code).
    pub data: Bytes,
    /// Gas limit fixed by the caller; `None` = estimate × margin.
    pub gas_limit: Option<u64>,
    /// Max fee per gas fixed by the caller (EIP-1559), still capped by config.
    #[serde(default, with = "wei_json")]
    pub max_fee_per_gas: Option<u128>,
    /// Max priority fee per gas fixed by the caller (EIP-1559).
    #[serde(default, with = "wei_json")]
    pub max_priority_fee_per_gas: Option<u128>,
    /// Send only to the chain's send-only endpoints (a private mempool),
    /// never to the public ones. Absent from the stored JSON when false, so
    /// request hashes of earlier intents stay what they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
    /// The deadline (README "Guardrails"): not given a nonce by then, the
    /// intent is REJECTED `expired`; given one and not mined by then, it is
    /// cancelled. Absent from the stored JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<chrono::DateTime<chrono::Utc>>,
}

impl Intent {
    /// A plain transfer of `value` wei to `to`: no data, gas and fees left
    /// to the engine, public, no deadline. What the engine sends on its own
    /// account: fillers and cancels (0 to the submitter itself) and top-ups.
    pub fn transfer(to: Address, value: U256) -> Self {
        Self {
            to: Some(to),
            value,
            data: Bytes::new(),
            gas_limit: None,
            max_fee_per_gas: None,
            max_priority_fee_per_gas: None,
            private: false,
            valid_until: None,
        }
    }

    /// Whether its deadline has passed at `now`.
    pub fn expired_at(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        self.valid_until.is_some_and(|until| until <= now)
    }
}

/// Fee amounts in the stored JSON: a number while it fits 64 bits (as every
/// row ever written has them, so request hashes stay what they were), a
/// decimal string above — JSON numbers beyond 64 bits do not survive
/// serde_json. Both forms are read back.
mod wei_json {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Option<u128>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            None => s.serialize_none(),
            Some(v) => match u64::try_from(*v) {
                Ok(small) => s.serialize_some(&small),
                Err(_) => s.serialize_some(&v.to_string()),
            },
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Number(u64),
        Decimal(String),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u128>, D::Error> {
        match Option::<Stored>::deserialize(d)? {
            None => Ok(None),
            Some(Stored::Number(n)) => Ok(Some(u128::from(n))),
            Some(Stored::Decimal(text)) => text.parse().map(Some).map_err(D::Error::custom),
        }
    }
}

impl Intent {
    /// Identity of the request body for idempotency: the same `request_id`
    /// with the same hash is a replay, with another hash a conflict.
    pub fn request_hash(&self, submitter: &SubmitterKey) -> B256 {
        // serde_json of this struct is deterministic (field order fixed, no
        // maps) and cannot fail: every field is a string, a bool-free number
        // of at most 64 bits, or null.
        let body = serde_json::to_vec(&(submitter.chain_id.get(), submitter.address, self))
            .expect("an intent always serialises (amounts above 64 bits are strings)");
        keccak256(body)
    }
}

/// Request-id prefixes of the intents txmgr makes itself (fillers,
/// top-ups, and any later kind under `txmgr-`). A client may not use them:
/// an id taken ahead of the engine would make the engine's own intent a
/// replay of the client's (README "Security").
pub const ENGINE_REQUEST_ID_PREFIXES: &[&str] = &["filler:", "txmgr-"];

/// The engine prefix `request_id` starts with, if any.
pub fn engine_request_id_prefix(request_id: &str) -> Option<&'static str> {
    ENGINE_REQUEST_ID_PREFIXES
        .iter()
        .copied()
        .find(|prefix| request_id.starts_with(prefix))
}

/// An intent accepted by the HTTP edge, about to be persisted as QUEUED.
#[derive(Debug, Clone)]
pub struct NewIntent {
    /// Fresh id (UUID v7: time-ordered, index friendly).
    pub tx_id: Uuid,
    /// Whose intent it is.
    pub submitter: SubmitterKey,
    /// The caller's idempotency key.
    pub request_id: Option<String>,
    /// The transaction asked for.
    pub intent: Intent,
    /// The create span's context, stored with the intent when tracing is
    /// on and the trace is sampled (not part of the idempotency hash).
    pub trace_context: Option<super::TraceParent>,
}

impl NewIntent {
    /// Wraps an intent with a fresh id.
    pub fn new(submitter: SubmitterKey, request_id: Option<String>, intent: Intent) -> Self {
        Self {
            tx_id: Uuid::now_v7(),
            submitter,
            request_id,
            intent,
            trace_context: None,
        }
    }

    /// The same intent, continuing the trace `parent` (the create's span).
    pub fn with_trace(mut self, parent: Option<super::TraceParent>) -> Self {
        self.trace_context = parent.filter(|p| p.sampled());
        self
    }
}

/// The short answer to a create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TxSummary {
    /// The intent's id.
    pub tx_id: Uuid,
    /// Its state now.
    pub state: TxState,
    /// The submitter's address.
    pub submitter: Address,
    /// The caller's idempotency key.
    pub request_id: Option<String>,
}

/// How persisting one create ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    /// Persisted as a new QUEUED intent (HTTP 202).
    Created(TxSummary),
    /// The same `request_id` with the same body exists already (HTTP 200).
    Existing(TxSummary),
    /// The same `request_id` exists with a different body (HTTP 409).
    Conflict {
        /// The intent that owns the request id.
        tx_id: Uuid,
    },
}

/// Why a create was not accepted (nothing was persisted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// The submitter is not configured on this deployment (HTTP 422).
    #[error("submitter {0} is not configured")]
    UnknownSubmitter(Address),
    /// The submitter is being removed by a reload: no new work (HTTP 422).
    #[error("submitter {0} is being removed")]
    Draining(Address),
    /// The submitter is in PROTECT after external use of its key (HTTP 423).
    #[error("submitter is protected: {0}")]
    Protected(String),
    /// The submitter's ingress queue is full (HTTP 429 with Retry-After).
    #[error("ingress queue full; retry after {retry_after:?}")]
    Overloaded {
        /// Suggested wait before retrying.
        retry_after: std::time::Duration,
    },
    /// The node holds as many creates (or bytes of them) as it may, over all
    /// submitters (HTTP 503 `busy` with Retry-After); nothing was queued.
    #[error("node ingress full; retry after {retry_after:?}")]
    Busy {
        /// Suggested wait before retrying.
        retry_after: std::time::Duration,
    },
    /// Persisting did not finish in time or the database failed (HTTP 503);
    /// the create may or may not have been stored — a retry with the same
    /// request id is safe.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The database refused this one intent for what it contains (HTTP 400);
    /// nothing was stored and a retry of the same body fails again. The
    /// edge validates so that this does not happen; it is the backstop that
    /// keeps one bad item from failing the creates batched with it.
    #[error("cannot be stored: {0}")]
    Unstorable(String),
    /// The submitter is paused and set to refuse creates meanwhile
    /// (`pause_accepts_creates = false`; HTTP 423 `paused`).
    #[error("submitter is paused: {0}")]
    Paused(String),
    /// The submitter's policy refuses it (HTTP 403 `policy_violation`);
    /// nothing was stored.
    #[error(transparent)]
    Policy(#[from] super::PolicyViolation),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(fee: u128) -> Intent {
        Intent {
            to: None,
            value: U256::from(1),
            data: Bytes::new(),
            gas_limit: None,
            max_fee_per_gas: Some(fee),
            max_priority_fee_per_gas: Some(1),
            private: false,
            valid_until: None,
        }
    }

    #[test]
    fn fees_of_any_size_round_trip_through_stored_json() {
        for fee in [0, u128::from(u64::MAX), u128::from(u64::MAX) + 1, u128::MAX] {
            let stored = serde_json::to_value(intent(fee)).expect("serialises");
            let back: Intent = serde_json::from_value(stored).expect("reads back");
            assert_eq!(back.max_fee_per_gas, Some(fee));
        }
    }

    #[test]
    fn small_fees_keep_their_numeric_form_and_request_hash() {
        let stored = serde_json::to_value(intent(30)).expect("serialises");
        assert_eq!(stored["max_fee_per_gas"], serde_json::json!(30));
        let big = intent(u128::MAX);
        let key = SubmitterKey::new(1, Address::ZERO);
        assert_ne!(big.request_hash(&key), intent(30).request_hash(&key));
    }
}
