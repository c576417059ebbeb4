//! `GET /v1/completions`: the completion feed's rows and pages.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::FeedEvent;

/// One completion as the feed serves it: a transaction's (with `tx_id`) or a
/// submitter's funds event (`LOW_BALANCE` / `BALANCE_RESTORED`, with the
/// balance and threshold instead).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CompletionRow {
    /// This row's position; passing it as `after` continues after this row.
    #[schema(pattern = "^[0-9]+-[0-9]+$")]
    pub cursor: String,
    /// The chain (EIP-155 id).
    pub chain_id: u64,
    /// The intent that completed; `null` for funds events.
    pub tx_id: Option<Uuid>,
    /// The submitter's address, lower-case `0x` hex.
    #[schema(pattern = "^0x[0-9a-f]{40}$")]
    pub submitter: String,
    /// The caller's idempotency key, if it gave one.
    pub request_id: Option<String>,
    /// The event: the state entered — a terminal state, or STUCK (which may
    /// still confirm later, and then appears again) — or a funds event.
    pub state: FeedEvent,
    /// Hash of the mined attempt (else the latest sent), when there was one.
    #[schema(pattern = "^0x[0-9a-f]{64}$")]
    pub tx_hash: Option<String>,
    /// Block of the receipt, for CONFIRMED and FAILED_FINAL.
    pub block_number: Option<i64>,
    /// The nonce, once one was assigned.
    pub nonce: Option<i64>,
    /// Why, for REJECTED, STUCK, FAILED_FINAL and CANCELLED when known.
    pub reason: Option<String>,
    /// Funds events: the balance read, in wei (decimal string).
    #[schema(pattern = "^[0-9]+$")]
    pub balance_wei: Option<String>,
    /// Funds events: the submitter's `min_balance`, in wei (decimal string).
    #[schema(pattern = "^[0-9]+$")]
    pub min_balance_wei: Option<String>,
    /// Database time of the transition.
    pub completed_at: DateTime<Utc>,
}

/// One page of the feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FeedPage {
    /// The rows, in feed order.
    pub items: Vec<CompletionRow>,
    /// Pass as `after` next time. The last item's cursor, or the `after` given
    /// when nothing was ready (for `after=end`, the end's position); `null`
    /// only while the feed is empty.
    pub next_after: Option<String>,
}
