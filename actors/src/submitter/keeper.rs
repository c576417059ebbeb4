//! The node's lease keeper: one task renews every lease this process holds,
//! in one statement per renew interval (README "Data model and leases" and "Benchmark"), instead
//! of one statement per submitter.
//!
//! ```text
//!  leader acquires ─► keeper.hold(lease) ─┐
//!                                         ▼  every renew_interval
//!            renew_all(UPDATE … FROM UNNEST … RETURNING)
//!               │ returned: deadline moved on (shared with the leader's guard);
//!               │           not preferred here any more → ask the actor to hand over
//!               └ missing:  deadline ended at once, the actor told (it stops)
//! ```
//!
//! A node holding no lease sends no statement at all. The leader's guard and
//! the keeper share one [`LeaseDeadline`](crate::store::LeaseDeadline) cell, so
//! `is_locally_valid` sees the keeper's renewals; a leader whose keeper is
//! late (a slow database) still renews in line before broadcasting
//! (`LeaderLease::renew_if_due`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use ractor::ActorRef;
use sqlx::PgPool;

use super::{LeaseTiming, SubmitterMsg};
use crate::{
    cluster::Membership,
    domain::{ChainId, SubmitterKey},
    metrics::LEASES_HELD,
    store::{self, HeldLease, LeaseGuard, LeaseOwner, StoreResult},
};

/// One lease the keeper renews.
#[derive(Debug, Clone)]
struct Held {
    lease: LeaseGuard,
    actor: ActorRef<SubmitterMsg>,
    since: Instant,
}

/// Renews all of this node's leases together. Shared by every submitter
/// context of the node.
#[derive(Debug)]
pub struct LeaseKeeper {
    pool: PgPool,
    owner: LeaseOwner,
    timing: LeaseTiming,
    membership: Arc<Membership>,
    /// The chain whose leases it renews (each chain has its keeper).
    chain: ChainId,
    held: Mutex<HashMap<SubmitterKey, Held>>,
}

impl LeaseKeeper {
    /// A keeper of `chain`'s leases holding nothing yet;
    /// [`LeaseKeeper::run`] drives it.
    pub fn new(
        pool: PgPool,
        owner: LeaseOwner,
        timing: LeaseTiming,
        membership: Arc<Membership>,
        chain: ChainId,
    ) -> Self {
        Self {
            pool,
            owner,
            timing,
            membership,
            chain,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// Renews `lease` from now on, for `actor`, which is told when it is lost
    /// or should be handed over. Replaces an older lease of the submitter.
    pub(crate) fn hold(&self, lease: &LeaseGuard, actor: ActorRef<SubmitterMsg>) {
        let held = Held {
            lease: lease.clone(),
            actor,
            since: Instant::now(),
        };
        if let Ok(mut map) = self.held.lock() {
            map.insert(lease.submitter, held);
        }
    }

    /// Stops renewing `lease` (released, handed over, or its actor stopped).
    /// A newer lease of the same submitter is left alone.
    pub(crate) fn forget(&self, lease: &LeaseGuard) {
        if let Ok(mut map) = self.held.lock() {
            if map
                .get(&lease.submitter)
                .is_some_and(|h| h.lease.deadline.same_cell(&lease.deadline))
            {
                map.remove(&lease.submitter);
            }
        }
    }

    /// Leases renewed by this keeper now.
    pub fn held_count(&self) -> usize {
        self.held.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Renews every `renew_interval` until the task is aborted; after a
    /// failed round it tries again after half the interval (the leases'
    /// local deadlines leave room for one missed round).
    pub async fn run(self: Arc<Self>) {
        let interval = self.timing.renew_interval.max(Duration::from_millis(10));
        let mut last_warning: Option<Instant> = None;
        loop {
            let pause = match self.renew_round().await {
                Ok(()) => interval,
                Err(err) => {
                    if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                        tracing::warn!(target: "txmgr::lease", error = %err, leases = self.held_count(), "renewing this node's leases failed; retrying");
                        last_warning = Some(Instant::now());
                    }
                    interval / 2
                }
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// One round: one statement for every held lease (none when none is held).
    async fn renew_round(&self) -> StoreResult<()> {
        let snapshot: Vec<Held> = self
            .held
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        metrics::gauge!(LEASES_HELD, "chain" => crate::metrics::chain_label(self.chain))
            .set(snapshot.len() as f64);
        if snapshot.is_empty() {
            return Ok(());
        }
        let request: Vec<HeldLease> = snapshot
            .iter()
            .map(|h| HeldLease {
                submitter: h.lease.submitter,
                token: h.lease.token,
            })
            .collect();
        let sent_at = Instant::now();
        let renewed =
            store::renew_all(&self.pool, &self.owner, self.timing.duration, &request).await?;
        let until = sent_at + self.timing.duration.saturating_sub(self.timing.clock_skew);
        for (held, renewed) in snapshot.into_iter().zip(renewed) {
            if renewed {
                held.lease.deadline.extend_to(until);
                self.ask_hand_over_if_preferred_elsewhere(&held);
            } else {
                self.lost(&held);
            }
        }
        Ok(())
    }

    /// Lease balancing: a leader that is not the submitter's preferred node
    /// (and has held the lease for `min_hold`) is asked to hand it over; the
    /// actor does it between its own messages, so no fenced write is cut.
    fn ask_hand_over_if_preferred_elsewhere(&self, held: &Held) {
        let address = held.lease.submitter.address;
        if self
            .membership
            .hand_over_to(&address, &self.owner.node_id, held.since.elapsed())
            .is_some()
        {
            let _ = held.actor.send_message(SubmitterMsg::LeaseTick);
        }
    }

    /// A lease the renewal did not return: it is gone (taken or handed over,
    /// released, or lapsed). Its deadline ends now, so no broadcast starts on
    /// it, and its actor is told; it finds the lease lost and stops.
    fn lost(&self, held: &Held) {
        let still_held = self.held.lock().is_ok_and(|mut map| {
            let same = map
                .get(&held.lease.submitter)
                .is_some_and(|h| h.lease.deadline.same_cell(&held.lease.deadline));
            if same {
                map.remove(&held.lease.submitter);
            }
            same
        });
        // Forgotten meanwhile (released, handed over): nothing to tell.
        if !still_held {
            return;
        }
        held.lease.deadline.end();
        tracing::warn!(target: "txmgr::lease", submitter = %held.lease.submitter, fencing_token = held.lease.token, "lease not renewed: lost");
        let _ = held.actor.send_message(SubmitterMsg::LeaseTick);
    }
}
