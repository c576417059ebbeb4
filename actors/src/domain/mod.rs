//! Domain vocabulary shared by the store, the actors and the HTTP edge.

mod state;
mod submitter;

pub use state::{AttemptKind, TxState};
pub use submitter::SubmitterKey;
