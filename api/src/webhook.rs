//! What a webhook receiver gets (README "Webhooks"): the feed row with the
//! delivery's id and the webhook's name, signed in `X-Txmgr-Signature`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::CompletionRow;

/// The JSON body of a webhook delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookEvent {
    /// The delivery id, `<webhook>:<cursor>`, as in `X-Txmgr-Delivery`:
    /// the same on every attempt, so a receiver deduplicates on it.
    pub id: String,
    /// The webhook's name.
    pub webhook: String,
    /// The feed row (its `chain_id`, `tx_id`, `state`, …).
    #[serde(flatten)]
    pub row: CompletionRow,
}
