//! Domain vocabulary shared by the store, the actors and the HTTP edge.

mod chain_id;
mod finality;
mod intent;
mod lease_timing;
mod policy_violation;
mod state;
mod submitter;
mod trace_parent;
pub mod tx_id_time;

pub use chain_id::{ChainId, ChainIdOutOfRange};
pub use finality::{FinalDecision, Finality, FinalityTag, ReorgedReceipt, DEFAULT_CONFIRMATIONS};
pub use intent::{
    engine_request_id_prefix, CreateError, CreateOutcome, Intent, NewIntent, TxSummary,
    ENGINE_REQUEST_ID_PREFIXES,
};
pub use lease_timing::LeaseTiming;
pub use policy_violation::PolicyViolation;
pub use state::AttemptKind;
pub use submitter::SubmitterKey;
pub use trace_parent::TraceParent;
/// The states an intent can be in, as the API names them.
pub use txmgr_api::{
    FeedEvent, SubState, TxState, UnknownFeedEvent, UnknownState, UnknownSubState,
};
