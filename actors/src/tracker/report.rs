//! What the tracking pools tell a submitter's leader. The tracker owns this
//! vocabulary and knows nothing of the SubmitterActor: a
//! [`SubmitterRouter`](super::SubmitterRouter) (the node's shared engine
//! state) turns each report into that actor's message and delivers it, so
//! the dependency runs one way, submitter → tracker.

use uuid::Uuid;

use crate::{
    domain::{FinalDecision, ReorgedReceipt},
    store::tracking::MinedReceipt,
};

/// One report for one submitter's leader.
#[derive(Debug)]
pub enum TrackerReport {
    /// Receipts the block matcher found for the leader's attempts.
    Receipts(Vec<(Uuid, MinedReceipt)>),
    /// Intents whose receipt reached finality (or whose finality decision
    /// the finality worker made).
    Finalize(Vec<FinalDecision>),
    /// Receipts whose block is no longer canonical.
    ReorgedOut(Vec<ReorgedReceipt>),
    /// Resubmit timers expired for these intents; empty = look for anything
    /// due or requested by an operator.
    ResubmitDue(Vec<Uuid>),
}
