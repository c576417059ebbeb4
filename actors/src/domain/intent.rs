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
    pub max_fee_per_gas: Option<u128>,
    /// Max priority fee per gas fixed by the caller (EIP-1559).
    pub max_priority_fee_per_gas: Option<u128>,
}

impl Intent {
    /// Identity of the request body for idempotency: the same `request_id`
    /// with the same hash is a replay, with another hash a conflict.
    pub fn request_hash(&self, submitter: &SubmitterKey) -> B256 {
        // serde_json of this struct is deterministic (field order fixed, no maps).
        let body =
            serde_json::to_vec(&(submitter.chain_id, submitter.address, self)).unwrap_or_default();
        keccak256(body)
    }
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
}

impl NewIntent {
    /// Wraps an intent with a fresh id.
    pub fn new(submitter: SubmitterKey, request_id: Option<String>, intent: Intent) -> Self {
        Self {
            tx_id: Uuid::now_v7(),
            submitter,
            request_id,
            intent,
        }
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
    /// Persisting did not finish in time or the database failed (HTTP 503);
    /// the create may or may not have been stored — a retry with the same
    /// request id is safe.
    #[error("unavailable: {0}")]
    Unavailable(String),
}
