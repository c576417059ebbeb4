//! Keeping the lease alive during long work. The node's lease keeper renews
//! every lease once per `renew_interval` and moves the deadline the leader's
//! guard shares; but a keeper round can be late (a slow database, a lock
//! wait), so long steps renew in line when the keeper has missed its round
//! by half an interval. Either way the renewal lands in the same deadline.

use super::{error::LeaderError, SubmitterContext};
use crate::store::{self, LeaseGuard, LeaseOutcome, LeaseRequest};

/// Renews `lease` in line when the keeper is late. Anything but a renewal
/// with the same token (another node took over, or our lease lapsed and
/// the token moved) means the lease is lost: the caller must stop.
pub(crate) async fn renew_if_due(
    ctx: &SubmitterContext,
    lease: &mut LeaseGuard,
) -> Result<(), LeaderError> {
    if !in_line_renewal_due(lease.time_left(), ctx) {
        return Ok(());
    }
    let request = LeaseRequest {
        submitter: ctx.key,
        owner: ctx.owner.clone(),
        duration: ctx.lease.duration,
        clock_skew: ctx.lease.clock_skew,
    };
    match store::acquire_or_renew(&ctx.pool, &request).await? {
        LeaseOutcome::Renewed(renewed) if lease.absorb_renewal(&renewed) => {
            if lease.is_locally_valid() {
                Ok(())
            } else {
                // The keeper found the lease lost meanwhile.
                Err(LeaderError::LeaseLost)
            }
        }
        _ => Err(LeaderError::LeaseLost),
    }
}

/// True when the keeper's renewal is overdue: the deadline is older than one
/// interval and a half (a keeper on time leaves at most one interval).
fn in_line_renewal_due(time_left: std::time::Duration, ctx: &SubmitterContext) -> bool {
    let full = ctx.lease.duration.saturating_sub(ctx.lease.clock_skew);
    time_left + ctx.lease.renew_interval * 3 / 2 <= full
}
