//! The lease as the leader's steps hold it: the one place that decides
//! whether the leader may still act, and that renews in line when the
//! node's lease keeper is late.
//!
//! The keeper renews every lease once per `renew_interval` and moves the
//! deadline the leader's guard shares; but a keeper round can be late (a slow
//! database, a lock wait), so long steps renew in line when the keeper has
//! missed its round by half an interval. Either way the renewal lands in the
//! same deadline.

use std::time::Duration;

use super::{error::LeaderError, SubmitterContext};
use crate::store::{self, LeaseGuard, LeaseOutcome, LeaseRequest};

/// A leader's lease during one step (cycle, resubmit, tracking report).
/// Fenced writes still check the token on the database; this type only
/// keeps the leader from acting on a lease it may already have lost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaderLease<'a> {
    ctx: &'a SubmitterContext,
    guard: &'a LeaseGuard,
}

impl<'a> LeaderLease<'a> {
    /// The lease `guard` held by the leader of `ctx`'s submitter.
    pub(crate) fn new(ctx: &'a SubmitterContext, guard: &'a LeaseGuard) -> Self {
        Self { ctx, guard }
    }

    /// The guard fenced writes are checked against.
    pub(crate) fn guard(&self) -> &'a LeaseGuard {
        self.guard
    }

    /// `Err(LeaseExpired)` once the local, conservative deadline has passed:
    /// nothing may leave the process on it any more.
    pub(crate) fn check_valid(&self) -> Result<(), LeaderError> {
        if self.guard.is_locally_valid() {
            Ok(())
        } else {
            Err(LeaderError::LeaseExpired)
        }
    }

    /// Before any byte is broadcast: renew if the keeper is late, then make
    /// sure the lease still holds.
    pub(crate) async fn check_may_send(&self) -> Result<(), LeaderError> {
        self.renew_if_due().await?;
        self.check_valid()
    }

    /// Renews in line when the keeper is late. Anything but a renewal with
    /// the same token (another node took over, or our lease lapsed and the
    /// token moved) means the lease is lost: the caller must stop.
    pub(crate) async fn renew_if_due(&self) -> Result<(), LeaderError> {
        if !in_line_renewal_due(self.guard.time_left(), self.ctx) {
            return Ok(());
        }
        let ctx = self.ctx;
        let request = LeaseRequest {
            submitter: ctx.key,
            owner: ctx.owner.clone(),
            duration: ctx.lease.duration,
            clock_skew: ctx.lease.clock_skew,
        };
        match store::acquire_or_renew(&ctx.pool, &request).await? {
            LeaseOutcome::Renewed(renewed) if self.guard.absorb_renewal(&renewed) => {
                if self.guard.is_locally_valid() {
                    Ok(())
                } else {
                    // The keeper found the lease lost meanwhile.
                    Err(LeaderError::LeaseLost)
                }
            }
            _ => Err(LeaderError::LeaseLost),
        }
    }
}

/// True when the keeper's renewal is overdue: the deadline is older than one
/// interval and a half (a keeper on time leaves at most one interval).
fn in_line_renewal_due(time_left: Duration, ctx: &SubmitterContext) -> bool {
    let full = ctx.lease.duration.saturating_sub(ctx.lease.clock_skew);
    time_left + ctx.lease.renew_interval * 3 / 2 <= full
}
