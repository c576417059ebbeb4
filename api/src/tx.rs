//! What the reads answer: one intent (`GET /v1/transactions/{tx_id}`) and a
//! page of a submitter's intents (`GET /v1/transactions?submitter=…`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{SubState, TxState};

/// One managed transaction as the API shows it — exactly the `GET
/// /v1/transactions/{tx_id}` shape, plus the intent's `data`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TxView {
    /// The chain it is sent on (EIP-155 id).
    pub chain_id: u64,
    /// The intent's id.
    pub tx_id: Uuid,
    /// The submitter's address, lower-case `0x` hex.
    #[schema(pattern = "^0x[0-9a-f]{40}$")]
    pub submitter: String,
    /// The caller's idempotency key.
    pub request_id: Option<String>,
    /// Lifecycle state.
    pub state: TxState,
    /// Finer detail within the state (`awaiting_receipt`, `mined`, ...).
    pub sub_state: Option<SubState>,
    /// The nonce, once allocated.
    pub nonce: Option<u64>,
    /// Hash of the latest signed attempt.
    #[schema(pattern = "^0x[0-9a-f]{64}$")]
    pub tx_hash: Option<String>,
    /// Hash of the attempt that was mined (may differ from `tx_hash` after a bump).
    #[schema(pattern = "^0x[0-9a-f]{64}$")]
    pub mined_tx_hash: Option<String>,
    /// Recipient, lower-case `0x` hex; `None` = contract creation.
    #[schema(pattern = "^0x[0-9a-f]{40}$")]
    pub to: Option<String>,
    /// Wei sent, as a decimal string (uint256 does not fit a JSON number).
    #[schema(pattern = "^[0-9]+$")]
    pub value: String,
    /// Call data (or init code), `0x` hex.
    #[schema(pattern = "^0x([0-9a-f]{2})*$")]
    pub data: String,
    /// How many signed attempts exist (rows of `tx_attempt`).
    pub attempts: i64,
    /// The last error the engine recorded, for humans.
    pub last_error: Option<String>,
    /// The receipt of the mined attempt, once there is one.
    pub receipt: Option<ReceiptView>,
    /// Blocks on top of the receipt's block, itself included, by the head
    /// this node has seen; `null` without a receipt or a known head.
    pub confirmations: Option<u64>,
    /// When the intent was accepted.
    pub created_at: DateTime<Utc>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
    /// When the intent reached a final receipt.
    pub confirmed_at: Option<DateTime<Utc>>,
}

/// The parts of a receipt a client needs. Fields read from the stored receipt
/// JSON are `None` when absent or unreadable: the receipt is the chain's
/// document, and a surprising encoding must not make the transaction unreadable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptView {
    /// Block that includes the mined attempt.
    pub block_number: u64,
    /// Hash of that block.
    #[schema(pattern = "^0x[0-9a-f]{64}$")]
    pub block_hash: String,
    /// 1 = success, 0 = reverted (EIP-658).
    pub status: Option<u8>,
    /// Gas used by the transaction.
    pub gas_used: Option<u64>,
    /// Price paid per gas in wei, as a decimal string.
    #[schema(pattern = "^[0-9]+$")]
    pub effective_gas_price: Option<String>,
}

impl TxView {
    /// `sub_state` `paused` on a QUEUED intent when `paused` (its
    /// submitter is paused by the answering node's configuration; an
    /// operator's pause is read with the row).
    pub fn with_config_pause(mut self, paused: bool) -> Self {
        if paused && self.state == TxState::Queued {
            self.sub_state = Some(SubState::Paused);
        }
        self
    }

    /// Fills `confirmations` from the chain head this node has processed.
    pub fn with_head(mut self, head: Option<u64>) -> Self {
        self.confirmations = match (&self.receipt, head) {
            (Some(receipt), Some(head)) if head >= receipt.block_number => {
                Some(head - receipt.block_number + 1)
            }
            _ => None,
        };
        self
    }
}

/// One page of `GET /v1/transactions?submitter=…`, in acceptance order.
/// (The daemon writes each item's JSON once and copies it into the page.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxPage {
    /// In acceptance order.
    pub items: Vec<TxView>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next: Option<String>,
}
