//! Keeping the lease alive during long work. The actor renews on a timer, but
//! a timer message waits behind a long work cycle (hundreds of sequential
//! broadcasts); so long steps renew in line when the last renewal is older
//! than `renew_interval`.

use super::{cycle::CycleError, SubmitterContext};
use crate::store::{self, LeaseGuard, LeaseOutcome, LeaseRequest};

/// Renews `lease` in place when a renewal is due. Anything but a renewal
/// with the same token (another node took over, or our lease lapsed and
/// the token moved) means the lease is lost: the caller must stop.
pub(crate) async fn renew_if_due(
    ctx: &SubmitterContext,
    lease: &mut LeaseGuard,
) -> Result<(), CycleError> {
    let full = ctx.lease.duration.saturating_sub(ctx.lease.clock_skew);
    if lease.time_left() + ctx.lease.renew_interval > full {
        return Ok(());
    }
    let request = LeaseRequest {
        submitter: ctx.key,
        owner: ctx.owner.clone(),
        duration: ctx.lease.duration,
        clock_skew: ctx.lease.clock_skew,
    };
    match store::acquire_or_renew(&ctx.pool, &request).await? {
        LeaseOutcome::Renewed(renewed) if renewed.token == lease.token => {
            *lease = renewed;
            Ok(())
        }
        _ => Err(CycleError::LeaseLost),
    }
}
