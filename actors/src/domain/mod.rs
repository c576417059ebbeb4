//! Domain vocabulary shared by the store, the actors and the HTTP edge.

mod finality;
mod intent;
mod state;
mod submitter;

pub use finality::{Finality, DEFAULT_CONFIRMATIONS};
pub use intent::{CreateError, CreateOutcome, Intent, NewIntent, TxSummary};
pub use state::{AttemptKind, TxState};
pub use submitter::SubmitterKey;
