//! What the tracking pools report to the leader — receipts, finality,
//! reorged-out receipts — and how the actor reacts to a report.

use std::time::Duration;

use ractor::{ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::{fatal, SubmitterMsg, SubmitterState};
use crate::{
    domain::{FinalDecision, ReorgedReceipt},
    store::tracking::MinedReceipt,
    submitter::{error::LeaderError, tracking_reports},
};

/// What a tracking pool reported.
pub(super) enum Tracking {
    Receipts(Vec<(Uuid, MinedReceipt)>),
    Finalize(Vec<FinalDecision>),
    Reorged(Vec<ReorgedReceipt>),
}

/// Writes what the tracking pools found; only the leader does. Anything that
/// may free an in-flight slot runs the work cycle next.
pub(super) async fn on_tracking(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
    report: Tracking,
) -> Result<(), ActorProcessingErr> {
    let Some(lease) = state.lease.clone() else {
        return Ok(());
    };
    let result = match &report {
        Tracking::Receipts(found) => {
            tracking_reports::record_receipts(&state.ctx, &lease, found).await
        }
        Tracking::Finalize(decided) => {
            tracking_reports::finalize(&state.ctx, &lease, decided).await
        }
        Tracking::Reorged(lost) => tracking_reports::reorged_out(&state.ctx, &lease, lost)
            .await
            .map(|()| 0),
    };
    match result {
        Ok(changed) if changed > 0 => {
            state.schedule_work(myself, Duration::ZERO);
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(LeaderError::LeaseExpired) => {
            state.check_lease_now(myself);
            Ok(())
        }
        // Not fatal: the finality worker repeats on the next head, the sweep
        // finds receipts.
        Err(err) => fatal(state, err),
    }
}
