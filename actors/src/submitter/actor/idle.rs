//! Idle release: a leader with no open intent (nothing QUEUED, ALLOCATED,
//! TRACKING or STUCK — so nothing awaits a receipt or finality either) for
//! `lease.idle_release_after` releases its lease and stops, so an idle node
//! holds no lease, no timer and no actor for it. A new create brings it back
//! at once: the create path starts an actor when none runs, and another
//! node's create reaches this one through `NOTIFY` (or, the lease being free,
//! the receiving node's actor takes it). The supervisor looks for open work
//! once more after the stop, which closes the race with a create committed
//! while the actor was stopping.

use std::time::{Duration, Instant};

use ractor::{ActorProcessingErr, ActorRef};

use super::{rearm, SubmitterMsg, SubmitterState};
use crate::{metrics::LEASE_ACQUISITIONS, store};

/// The stop reason the supervisor reads as "idle, restart on new work only".
pub(crate) const IDLE_STOP: &str = "idle";

/// What an idle check decides, from what the actor knows (pure, tested below).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdleCheck {
    /// Not a leader, or a lease that is kept (protected, funds watched): no
    /// idle release (and no timer).
    NotApplicable,
    /// Active too recently or with work queued locally: look again after this.
    LookAgainIn(Duration),
    /// Quiet long enough: ask the database whether anything is open.
    AskDatabase,
}

/// Decides what an idle tick does.
pub(super) fn idle_check(
    leader: bool,
    kept: bool,
    quiet_for: Duration,
    linger: Duration,
    queued_locally: bool,
) -> IdleCheck {
    if !leader || kept {
        return IdleCheck::NotApplicable;
    }
    if queued_locally {
        return IdleCheck::LookAgainIn(linger);
    }
    match linger.checked_sub(quiet_for) {
        Some(left) if !left.is_zero() => IdleCheck::LookAgainIn(left),
        _ => IdleCheck::AskDatabase,
    }
}

/// Arms the idle timer for `after`.
pub(super) fn arm_idle(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
    after: Duration,
) {
    rearm(
        &mut state.idle_timer,
        myself.send_after(after, || SubmitterMsg::IdleTick),
    );
}

/// The idle timer: releases the lease and stops when nothing is open.
pub(super) async fn on_idle_tick(
    myself: &ActorRef<SubmitterMsg>,
    state: &mut SubmitterState,
) -> Result<(), ActorProcessingErr> {
    let linger = state.ctx.lease.idle_release_after;
    let queued_locally = state.handle.mailbox_depth() > 0 || state.handle.ingress_depth() > 0;
    // A protected or paused submitter, and one whose funds are watched,
    // keep the lease (a paused one has QUEUED work that waits).
    let kept = state.protect_reason.is_some()
        || state.handle.status().pause().is_some()
        || state.ctx.paused_by_config()
        || state.ctx.settings().min_balance.is_some();
    let check = idle_check(
        state.lease.is_some(),
        kept,
        state.last_activity.elapsed(),
        linger,
        queued_locally,
    );
    match check {
        IdleCheck::NotApplicable => {
            state.idle_timer = None;
            Ok(())
        }
        IdleCheck::LookAgainIn(after) => {
            arm_idle(myself, state, after);
            Ok(())
        }
        IdleCheck::AskDatabase => {
            match store::intents::open_count(&state.ctx.pool, state.ctx.key).await {
                Ok(0) => {
                    release_idle(state).await;
                    myself.stop(Some(IDLE_STOP.into()));
                    Ok(())
                }
                Ok(_) => {
                    state.last_activity = Instant::now();
                    arm_idle(myself, state, linger);
                    Ok(())
                }
                Err(err) => {
                    tracing::debug!(target: "txmgr::submitter", submitter = %state.ctx.key, error = %err, "idle check failed; keeping the lease");
                    arm_idle(myself, state, linger);
                    Ok(())
                }
            }
        }
    }
}

/// Stops renewing, ends the local deadline and releases the lease row, so
/// any node's actor can take it at once when work arrives.
async fn release_idle(state: &mut SubmitterState) {
    let Some(lease) = state.lease.take() else {
        return;
    };
    state.ctx.keeper.forget(&lease);
    lease.deadline.end();
    match store::release(&state.ctx.pool, &lease).await {
        Ok(true) => {
            metrics::counter!(LEASE_ACQUISITIONS, "chain" => crate::metrics::chain_label(state.ctx.key.chain_id), "result" => "idle_released").increment(1);
            tracing::info!(target: "txmgr::submitter", submitter = %state.ctx.key, fencing_token = lease.token, "idle: lease released");
        }
        Ok(false) => {}
        Err(err) => {
            tracing::warn!(target: "txmgr::submitter", submitter = %state.ctx.key, error = %err, "idle lease release failed; it will expire");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINGER: Duration = Duration::from_secs(30);

    #[test]
    fn only_an_unprotected_leader_releases_when_idle() {
        let quiet = Duration::from_secs(60);
        assert_eq!(
            idle_check(false, false, quiet, LINGER, false),
            IdleCheck::NotApplicable
        );
        assert_eq!(
            idle_check(true, true, quiet, LINGER, false),
            IdleCheck::NotApplicable
        );
        assert_eq!(
            idle_check(true, false, quiet, LINGER, false),
            IdleCheck::AskDatabase
        );
    }

    #[test]
    fn a_recent_activity_or_local_queue_postpones_the_check() {
        assert_eq!(
            idle_check(true, false, Duration::from_secs(10), LINGER, false),
            IdleCheck::LookAgainIn(Duration::from_secs(20))
        );
        assert_eq!(
            idle_check(true, false, Duration::from_secs(60), LINGER, true),
            IdleCheck::LookAgainIn(LINGER)
        );
        assert_eq!(
            idle_check(true, false, LINGER, LINGER, false),
            IdleCheck::AskDatabase
        );
    }
}
