//! `POST /v1/transactions/{tx_id}/cancel` · `/speedup` · `/rebroadcast` ·
//! `/requeue`: the optional body and the answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::TxState;

/// Optional body of an action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionBody {
    /// Why (kept in the audit log), up to 500 characters, no control
    /// characters other than line breaks and tabs.
    #[schema(max_length = 500)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Answer to an accepted action (202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ActionAccepted {
    /// The transaction.
    pub tx_id: Uuid,
    /// `cancel` | `speedup` | `rebroadcast` | `requeue`.
    #[schema(pattern = "^(cancel|speedup|rebroadcast|requeue)$")]
    pub action: String,
    /// `done` (a QUEUED intent was cancelled, or an intent requeued),
    /// `requested` (the leader acts next; answered 202) or `unchanged` (a
    /// cancel of an intent already being cancelled or already CANCELLED:
    /// nothing was recorded; answered 200).
    #[schema(pattern = "^(done|requested|unchanged)$")]
    pub status: String,
    /// The state after the request (CANCELLED when done; the current state
    /// when unchanged).
    pub state: TxState,
}
