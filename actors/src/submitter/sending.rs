//! The leader's send pipeline: a cycle's persisted attempts are broadcast on
//! their own task while the next cycle loads, allocates, signs and persists
//! the next batch, so one busy submitter's database round trips and signing
//! overlap its sends instead of adding to them.
//!
//! At most one batch is in flight per leader, and every other step that puts
//! bytes on the wire (the next batch, due re-broadcasts, resubmits, the
//! re-broadcast after a reorg) first [settles](InFlightSend::settle) it, so
//! nonces still leave in order and no attempt is sent by two steps at once.
//! A lost lease or a stopping actor [cancels](InFlightSend::cancel) it: the
//! attempts are persisted before any byte is sent, so whatever was not sent
//! or not recorded is sent again by the recovery of this or the next leader
//! (the node answers "already known" for bytes it has).

use std::sync::Arc;

use ractor::ActorRef;
use tokio::task::JoinHandle;

use super::{
    broadcast::{broadcast, BroadcastReport},
    error::LeaderError,
    leader_lease::LeaderLease,
    SubmitterContext, SubmitterMsg,
};
use crate::store::{pipeline::PendingAttempt, LeaseGuard};

/// One batch being broadcast and recorded on its own task.
#[derive(Debug)]
pub(crate) struct InFlightSend {
    task: JoinHandle<Result<BroadcastReport, LeaderError>>,
}

impl InFlightSend {
    /// Starts broadcasting `attempts` (persisted, in nonce order after any
    /// earlier batch, which must be settled) and tells `actor` with
    /// [`SubmitterMsg::Sent`] when done, so the report is applied even when
    /// no other work comes.
    pub(crate) fn start(
        ctx: Arc<SubmitterContext>,
        lease: LeaseGuard,
        attempts: Vec<PendingAttempt>,
        actor: ActorRef<SubmitterMsg>,
    ) -> Self {
        let task = tokio::spawn(async move {
            let report = broadcast(&ctx, LeaderLease::new(&ctx, &lease), attempts).await;
            // The actor may have stopped meanwhile: nothing to tell then.
            let _ = actor.send_message(SubmitterMsg::Sent);
            report
        });
        Self { task }
    }

    /// True once the task has ended (its report can be taken at once).
    pub(crate) fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits for the batch to be sent and recorded; its report, or why it
    /// stopped.
    pub(crate) async fn settle(self) -> Result<BroadcastReport, LeaderError> {
        match self.task.await {
            Ok(result) => result,
            Err(err) => Err(LeaderError::SendTask(err.to_string())),
        }
    }

    /// Stops the task and waits until it no longer runs, so nothing more is
    /// sent on its behalf once this returns.
    pub(crate) async fn cancel(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// The leader's send pipeline: at most one [`InFlightSend`].
#[derive(Debug)]
pub(crate) struct SendPipeline {
    ctx: Arc<SubmitterContext>,
    actor: ActorRef<SubmitterMsg>,
    in_flight: Option<InFlightSend>,
}

impl SendPipeline {
    /// An empty pipeline of the actor `actor` working for `ctx`.
    pub(crate) fn new(ctx: Arc<SubmitterContext>, actor: ActorRef<SubmitterMsg>) -> Self {
        Self {
            ctx,
            actor,
            in_flight: None,
        }
    }

    /// True while a batch is being sent.
    pub(crate) fn is_busy(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|s| !s.is_finished())
    }

    /// Waits for the batch in flight, if any; its report (the default,
    /// empty one when nothing was in flight).
    pub(crate) async fn settle(&mut self) -> Result<BroadcastReport, LeaderError> {
        match self.in_flight.take() {
            Some(send) => send.settle().await,
            None => Ok(BroadcastReport::default()),
        }
    }

    /// Settles what is in flight, then starts sending `attempts` on `lease`.
    /// Returns the settled batch's report.
    pub(crate) async fn send_next(
        &mut self,
        lease: &LeaseGuard,
        attempts: Vec<PendingAttempt>,
    ) -> Result<BroadcastReport, LeaderError> {
        let report = self.settle().await?;
        if !attempts.is_empty() {
            self.in_flight = Some(InFlightSend::start(
                self.ctx.clone(),
                lease.clone(),
                attempts,
                self.actor.clone(),
            ));
        }
        Ok(report)
    }

    /// Stops sending (lease lost, hand-over, stop); see [`InFlightSend::cancel`].
    pub(crate) async fn cancel(&mut self) {
        if let Some(send) = self.in_flight.take() {
            send.cancel().await;
        }
    }
}
