//! What a SubmitterActor shows outside itself, without being asked: updated
//! by the actor, read by the HTTP edge and the ops view without queueing
//! behind the actor's work.

use std::sync::{
    atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU8, Ordering},
    Arc, RwLock,
};

use crate::store::LeaseDeadline;

/// A submitter actor's role on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not started yet, or restarting.
    Idle,
    /// Holds the lease and does the work.
    Leader,
    /// Another node holds the lease; this node's lease scan wakes it when
    /// that lease can be taken over.
    Standby,
    /// PROTECT: external use of the key was seen; no new work.
    Protected,
    /// Draining before a stop.
    Stopping,
    /// Restarted too often; given up on until an operator restarts it.
    Failed,
}

impl Role {
    const ALL: [Role; 6] = [
        Role::Idle,
        Role::Leader,
        Role::Standby,
        Role::Protected,
        Role::Stopping,
        Role::Failed,
    ];

    /// The name shown in the ops view.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Idle => "idle",
            Role::Leader => "leader",
            Role::Standby => "standby",
            Role::Protected => "protected",
            Role::Stopping => "stopping",
            Role::Failed => "failed",
        }
    }
}

/// Shared, lock-light status of one submitter on this node.
#[derive(Debug, Default)]
pub struct SubmitterStatus {
    role: AtomicU8,
    fencing_token: AtomicI64,
    restarts: AtomicU32,
    head_of_line_blocked: AtomicBool,
    protect_reason: RwLock<Option<String>>,
    last_error: RwLock<Option<String>>,
    lease_deadline: RwLock<Option<LeaseDeadline>>,
    /// Last balance read by the leader (wei) and whether it was below `min_balance`.
    funds: RwLock<Option<(u128, bool)>>,
    /// An operator's pause (`submitter_pause`), as this node last read it.
    pause: RwLock<Option<Arc<crate::store::pause::Pause>>>,
}

impl SubmitterStatus {
    /// The current role.
    pub fn role(&self) -> Role {
        Role::ALL[usize::from(self.role.load(Ordering::Relaxed)).min(Role::ALL.len() - 1)]
    }

    /// Sets the role.
    pub fn set_role(&self, role: Role) {
        let index = Role::ALL.iter().position(|r| *r == role).unwrap_or(0);
        self.role
            .store(u8::try_from(index).unwrap_or(0), Ordering::Relaxed);
    }

    /// The fencing token while leader (0 otherwise).
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token.load(Ordering::Relaxed)
    }

    /// Records the token of the lease held (0 = none).
    pub fn set_fencing_token(&self, token: i64) {
        self.fencing_token.store(token, Ordering::Relaxed);
    }

    /// Whether the lowest unmined nonce is STUCK, blocking every later nonce
    /// on chain (known to the leader; false elsewhere).
    pub fn head_of_line_blocked(&self) -> bool {
        self.head_of_line_blocked.load(Ordering::Relaxed)
    }

    /// Records whether the head of the nonce line is STUCK.
    pub fn set_head_of_line_blocked(&self, blocked: bool) {
        self.head_of_line_blocked.store(blocked, Ordering::Relaxed);
    }

    /// How often the supervisor restarted the actor.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Counts a restart.
    pub fn count_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// The operator's pause of the submitter, as this node last read it
    /// (the supervisor re-reads it every discovery interval).
    pub fn pause(&self) -> Option<Arc<crate::store::pause::Pause>> {
        self.pause.read().map(|p| p.clone()).unwrap_or(None)
    }

    /// Records the pause read (or written) here.
    pub fn set_pause(&self, pause: Option<Arc<crate::store::pause::Pause>>) {
        if let Ok(mut slot) = self.pause.write() {
            *slot = pause;
        }
    }

    /// Why the submitter is in PROTECT, if it is.
    pub fn protect_reason(&self) -> Option<String> {
        self.protect_reason
            .read()
            .map(|r| r.clone())
            .unwrap_or(None)
    }

    /// Sets or clears the PROTECT reason.
    pub fn set_protect_reason(&self, reason: Option<String>) {
        if let Ok(mut slot) = self.protect_reason.write() {
            *slot = reason;
        }
    }

    /// Time left on the lease by the local, conservative clock (None: no lease).
    /// Read live from the lease's deadline, which the node's lease keeper
    /// moves on; zero once the lease was found lost.
    pub fn lease_time_left(&self) -> Option<std::time::Duration> {
        let deadline = self.lease_deadline.read().ok()?.clone()?;
        Some(deadline.until().map_or(std::time::Duration::ZERO, |until| {
            until.saturating_duration_since(std::time::Instant::now())
        }))
    }

    /// Records the deadline of the lease held (None: none held).
    pub fn set_lease_deadline(&self, deadline: Option<LeaseDeadline>) {
        if let Ok(mut slot) = self.lease_deadline.write() {
            *slot = deadline;
        }
    }

    /// The last balance read by this node's leader, in wei, and whether it
    /// was below `min_balance` (None: not read here).
    pub fn funds(&self) -> Option<(u128, bool)> {
        self.funds.read().ok().and_then(|f| *f)
    }

    /// Records a balance read.
    pub fn set_funds(&self, balance: u128, low: bool) {
        if let Ok(mut slot) = self.funds.write() {
            *slot = Some((balance, low));
        }
    }

    /// The last error the actor reported.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.read().map(|r| r.clone()).unwrap_or(None)
    }

    /// Records an error for the ops view.
    pub fn set_last_error(&self, error: Option<String>) {
        if let Ok(mut slot) = self.last_error.write() {
            *slot = error;
        }
    }
}
