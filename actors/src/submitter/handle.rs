//! The SubmitterHandle: what the HTTP edge talks to for one submitter.
//!
//! Creates are bounded *before* anything is queued: each handle admits at
//! most `ingress_capacity` creates waiting to be persisted and answers
//! `Overloaded` at once beyond that, and the node as a whole admits at most
//! its ingress limits (items and bytes over every submitter) and answers
//! `Busy` beyond those, instead of growing memory. Admitted
//! creates go to the node's ingress writer (`ingress.rs`), which persists
//! creates of all submitters in one transaction per batch, answers each caller
//! after the commit and wakes the local actor. Inserting QUEUED rows is not a
//! critical write, so every node accepts creates the same way, leader or not.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, RwLock,
    },
    time::Duration,
};

use ractor::ActorRef;
use tokio::sync::oneshot;

use super::{
    actor::SubmitterMsg,
    ingress::{queued_bytes, IngressItem, IngressPermit, IngressWriter},
    status::SubmitterStatus,
};
use crate::{
    domain::{CreateError, CreateOutcome, NewIntent, SubmitterKey},
    tracker::Coalesced,
};

/// Suggested client back-off when the ingress queue is full.
pub const OVERLOADED_RETRY_AFTER: Duration = Duration::from_secs(1);
/// Suggested client back-off when the node's ingress (all submitters) is full.
pub const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Shared view of one submitter on this node.
#[derive(Debug, Clone)]
pub struct SubmitterHandle {
    inner: Arc<HandleInner>,
}

#[derive(Debug)]
struct HandleInner {
    key: SubmitterKey,
    ingress: IngressWriter,
    ingress_capacity: usize,
    ingress_depth: AtomicUsize,
    mailbox_depth: AtomicUsize,
    work_queued: AtomicBool,
    /// A `Finalize` report waits in the mailbox (coalesced, see `send_repeating`).
    finalize_queued: Coalesced,
    /// A repeating `ReorgedOut` report waits in the mailbox.
    reorged_queued: Coalesced,
    draining: AtomicBool,
    actor: RwLock<Option<ActorRef<SubmitterMsg>>>,
    status: SubmitterStatus,
    create_timeout: Duration,
}

impl SubmitterHandle {
    /// Creates the handle; its creates go through the node's `ingress`
    /// writer, at most `capacity` of them waiting at once.
    pub fn new(
        key: SubmitterKey,
        ingress: IngressWriter,
        capacity: usize,
        create_timeout: Duration,
    ) -> Self {
        SubmitterHandle {
            inner: Arc::new(HandleInner {
                key,
                ingress,
                ingress_capacity: capacity.max(1),
                ingress_depth: AtomicUsize::new(0),
                mailbox_depth: AtomicUsize::new(0),
                work_queued: AtomicBool::new(false),
                finalize_queued: Coalesced::default(),
                reorged_queued: Coalesced::default(),
                draining: AtomicBool::new(false),
                actor: RwLock::new(None),
                status: SubmitterStatus::default(),
                create_timeout,
            }),
        }
    }

    pub(crate) fn ingress_counter(&self) -> &AtomicUsize {
        &self.inner.ingress_depth
    }

    /// The submitter.
    pub fn key(&self) -> SubmitterKey {
        self.inner.key
    }

    /// Status shared with the actor.
    pub fn status(&self) -> &SubmitterStatus {
        &self.inner.status
    }

    /// Creates waiting to be persisted.
    pub fn ingress_depth(&self) -> usize {
        self.inner.ingress_depth.load(Ordering::Relaxed)
    }

    /// Messages sent to the actor and not yet handled.
    pub fn mailbox_depth(&self) -> usize {
        self.inner.mailbox_depth.load(Ordering::Relaxed)
    }

    /// Refuse new creates (the submitter was removed from the configuration).
    pub fn set_draining(&self, draining: bool) {
        self.inner.draining.store(draining, Ordering::Relaxed);
    }

    /// Persists one create (batched with concurrent ones) and answers after
    /// the commit.
    pub async fn create(&self, intent: NewIntent) -> Result<CreateOutcome, CreateError> {
        if self.inner.draining.load(Ordering::Relaxed) {
            return Err(CreateError::Draining(self.inner.key.address));
        }
        if let Some(reason) = self.inner.status.protect_reason() {
            return Err(CreateError::Protected(reason));
        }
        // Bound the queues before anything is queued: a full one answers at once.
        let permit = self.admit(queued_bytes(&intent))?;
        let (reply, answer) = oneshot::channel();
        let item = IngressItem {
            intent,
            reply,
            handle: self.clone(),
            permit,
        };
        // A refused item is dropped with its permit: its place is given back.
        if !self.inner.ingress.submit(item) {
            return Err(CreateError::Unavailable("ingress writer stopped".into()));
        }
        match tokio::time::timeout(self.inner.create_timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CreateError::Unavailable("ingress writer stopped".into())),
            Err(_) => Err(CreateError::Unavailable(
                "create not committed in time; retrying with the same request id is safe".into(),
            )),
        }
    }

    /// A place for one create of `bytes`: first in this submitter's queue
    /// (else `Overloaded`), then in the node's (else `Busy`).
    fn admit(&self, bytes: usize) -> Result<IngressPermit, CreateError> {
        if self.inner.ingress_depth.fetch_add(1, Ordering::Relaxed) >= self.inner.ingress_capacity {
            self.ingress_taken();
            return Err(CreateError::Overloaded {
                retry_after: OVERLOADED_RETRY_AFTER,
            });
        }
        // From here the permit owns the count in `ingress_depth`.
        self.inner.ingress.reserve(self, bytes).ok_or_else(|| {
            self.ingress_taken();
            CreateError::Busy {
                retry_after: BUSY_RETRY_AFTER,
            }
        })
    }

    /// Attaches the actor spawned for this submitter (or detaches it).
    ///
    /// The previous actor's mailbox died with it, and the messages marked
    /// as queued with it: the marks and the depth start over, or a report
    /// coalesced behind a lost message would never be sent again.
    pub fn set_actor(&self, actor: Option<ActorRef<SubmitterMsg>>) {
        if let Ok(mut slot) = self.inner.actor.write() {
            *slot = actor;
            self.inner.mailbox_depth.store(0, Ordering::Relaxed);
            self.inner.work_queued.store(false, Ordering::Release);
            self.inner.finalize_queued.taken();
            self.inner.reorged_queued.taken();
        }
    }

    /// The running actor, if any.
    pub fn actor(&self) -> Option<ActorRef<SubmitterMsg>> {
        self.inner.actor.read().ok().and_then(|a| a.clone())
    }

    /// Sends a message to the actor, counting it in the mailbox depth.
    pub fn send(&self, msg: SubmitterMsg) -> bool {
        let Some(actor) = self.actor() else {
            return false;
        };
        self.inner.mailbox_depth.fetch_add(1, Ordering::Relaxed);
        if actor.send_message(msg).is_err() {
            self.inner.mailbox_depth.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Sends a report its sender repeats on every head while it holds
    /// (`Finalize`, `ReorgedOut` from the finality workers): dropped while one
    /// of its kind still waits, since the next head brings a fresh one. Other
    /// messages are sent as by [`SubmitterHandle::send`].
    pub fn send_repeating(&self, msg: SubmitterMsg) -> bool {
        let slot = match &msg {
            SubmitterMsg::Finalize(_) => &self.inner.finalize_queued,
            SubmitterMsg::ReorgedOut(_) => &self.inner.reorged_queued,
            _ => return self.send(msg),
        };
        slot.offer(|| self.send(msg))
    }

    /// Wakes the actor for new work; coalesced: at most one wake-up queued.
    pub fn wake(&self) {
        if !self.inner.work_queued.swap(true, Ordering::AcqRel) && !self.send(SubmitterMsg::Work) {
            self.inner.work_queued.store(false, Ordering::Release);
        }
    }

    /// Called by the actor when it takes a message out of its mailbox.
    pub(crate) fn message_taken(&self, msg: &SubmitterMsg) {
        // Saturating: a message that bypassed the handle must not wrap the count.
        let _ = self
            .inner
            .mailbox_depth
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| d.checked_sub(1));
        match msg {
            SubmitterMsg::Work => self.inner.work_queued.store(false, Ordering::Release),
            SubmitterMsg::Finalize(_) => self.inner.finalize_queued.taken(),
            // A reorg event (sent uncoalesced) unmarks too: then two may wait
            // at most, one repeating and the event.
            SubmitterMsg::ReorgedOut(_) => self.inner.reorged_queued.taken(),
            _ => {}
        }
    }
}
