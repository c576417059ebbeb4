//! The wire types of txmgr's HTTP API (README "HTTP API"): what a client
//! sends and what the daemon answers. The daemon serialises these types and
//! derives its OpenAPI document from them; the Rust client
//! (`txmgr-client`) deserialises them, so a field renamed on one side fails
//! the other's build.
//!
//! Nothing here validates: the daemon checks every field of a request and
//! answers 400 with the field at fault.

mod action;
mod create;
mod error;
mod feed;
mod feed_event;
mod state;
mod sub_state;
mod tx;
mod webhook;

pub use action::{ActionAccepted, ActionBody};
pub use create::{CreateBody, CreatedBody, WeiString};
pub use error::{ErrorCode, ErrorDetail, ErrorIssue, ErrorResponse, ERROR_CODES};
pub use feed::{CompletionRow, FeedPage};
pub use feed_event::{FeedEvent, UnknownFeedEvent};
pub use state::{TxState, UnknownState};
pub use sub_state::{SubState, UnknownSubState};
pub use tx::{ReceiptView, TxPage, TxView};
pub use webhook::WebhookEvent;
