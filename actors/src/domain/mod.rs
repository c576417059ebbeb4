//! Domain vocabulary shared by the store, the actors and the HTTP edge.

mod chain_id;
mod feed_event;
mod finality;
mod intent;
mod lease_timing;
mod policy_violation;
mod state;
mod sub_state;
mod submitter;
mod trace_parent;
pub mod tx_id_time;

pub use chain_id::{ChainId, ChainIdOutOfRange};
pub use feed_event::{FeedEvent, UnknownFeedEvent};
pub use finality::{FinalDecision, Finality, FinalityTag, ReorgedReceipt, DEFAULT_CONFIRMATIONS};
pub use intent::{
    engine_request_id_prefix, CreateError, CreateOutcome, Intent, NewIntent, TxSummary,
    ENGINE_REQUEST_ID_PREFIXES,
};
pub use lease_timing::LeaseTiming;
pub use policy_violation::PolicyViolation;
pub use state::{AttemptKind, TxState};
pub use sub_state::{SubState, UnknownSubState};
pub use submitter::SubmitterKey;
pub use trace_parent::TraceParent;
