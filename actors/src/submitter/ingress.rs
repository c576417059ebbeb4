//! The node's ingress writer: creates for *all* submitters of this node are
//! persisted together, many per INSERT transaction (group commit across
//! submitters), so a hundred submitters with one create each cost one commit,
//! not a hundred.
//!
//! Creates are bounded before they are queued, twice: each handle admits at
//! most its submitter's `ingress_capacity`, and the node as a whole at most
//! [`IngressLimits`] (items and bytes, over every submitter). Admission hands
//! out an [`IngressPermit`] that travels with the create and gives its place
//! back when dropped — after the writer has answered, whatever the answer —
//! so a create that is still waiting for its commit keeps its place even when
//! its caller has stopped waiting.

use std::sync::{atomic::Ordering, Arc};

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use super::{status::Role, SubmitterHandle};
use crate::{
    domain::{CreateError, CreateOutcome, NewIntent, SubmitterKey},
    store::{intents, StoreError},
};

/// What one queued create is counted as besides its `data` and `request_id`:
/// the intent's fixed fields, the reply channel, the handle and the copy the
/// writer makes for its INSERT.
pub const INGRESS_ITEM_OVERHEAD_BYTES: usize = 512;

/// Node-wide bounds of creates admitted and not yet answered by the writer
/// (`node.ingress_max_items`, `node.ingress_max_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressLimits {
    /// Creates waiting at once, over every submitter.
    pub max_items: usize,
    /// Their approximate memory ([`queued_bytes`]); a single create larger
    /// than this is admitted alone.
    pub max_bytes: usize,
}

/// What a create is counted as against [`IngressLimits::max_bytes`].
pub fn queued_bytes(intent: &NewIntent) -> usize {
    INGRESS_ITEM_OVERHEAD_BYTES
        + intent.intent.data.len()
        + intent.request_id.as_ref().map_or(0, String::len)
}

/// Answer channel of one create.
pub(crate) type Reply = oneshot::Sender<Result<CreateOutcome, CreateError>>;

/// One create waiting to be persisted.
#[derive(Debug)]
pub(crate) struct IngressItem {
    pub(crate) intent: NewIntent,
    pub(crate) reply: Reply,
    pub(crate) handle: SubmitterHandle,
    /// Its place in the queues; dropped before the caller is answered, so a
    /// caller that retries at once finds it free.
    pub(crate) permit: IngressPermit,
}

/// A create's place in the ingress queues: one of its submitter's
/// `ingress_capacity` and its share of the node's items and bytes. Dropping
/// it gives all of them back.
#[derive(Debug)]
pub(crate) struct IngressPermit {
    handle: SubmitterHandle,
    _item: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

impl Drop for IngressPermit {
    fn drop(&mut self) {
        self.handle.ingress_taken();
    }
}

/// Creates persisted per ingress transaction at most.
const NODE_MAX_BATCH: usize = 1000;

/// Sends creates to the node's writer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct IngressWriter {
    sender: mpsc::UnboundedSender<IngressItem>,
    limits: IngressLimits,
    /// One permit per create the node may hold.
    items: Arc<Semaphore>,
    /// One permit per byte the node may hold.
    bytes: Arc<Semaphore>,
}

impl IngressWriter {
    /// Starts the writer task: batches of up to `max_batch` creates, one
    /// transaction each, at most `limits` waiting. The channel itself is
    /// unbounded because nothing enters it without an [`IngressPermit`].
    pub fn start(pool: PgPool, max_batch: usize, limits: IngressLimits) -> Self {
        let limits = IngressLimits {
            max_items: limits.max_items.clamp(1, Semaphore::MAX_PERMITS),
            max_bytes: limits.max_bytes.clamp(1, Semaphore::MAX_PERMITS),
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, receiver, max_batch.max(1)));
        Self {
            sender,
            limits,
            items: Arc::new(Semaphore::new(limits.max_items)),
            bytes: Arc::new(Semaphore::new(limits.max_bytes)),
        }
    }

    /// Takes the node's share of a place for a create of `bytes`; `None`
    /// when the node holds as many creates or bytes as it may. `handle` has
    /// already counted the create in its own depth; the permit gives that
    /// back too.
    pub(super) fn reserve(&self, handle: &SubmitterHandle, bytes: usize) -> Option<IngressPermit> {
        let bytes = u32::try_from(bytes.min(self.limits.max_bytes)).unwrap_or(u32::MAX);
        let item = self.items.clone().try_acquire_owned().ok()?;
        let bytes = self.bytes.clone().try_acquire_many_owned(bytes).ok()?;
        Some(IngressPermit {
            handle: handle.clone(),
            _item: item,
            _bytes: bytes,
        })
    }

    /// The node's writer: batches of up to 1,000 creates (the node-wide
    /// writer every chain's engine shares).
    pub fn for_node(pool: PgPool, limits: IngressLimits) -> Self {
        Self::start(pool, NODE_MAX_BATCH, limits)
    }

    /// Queues a create; false when the writer is gone (shutting down).
    pub(crate) fn submit(&self, item: IngressItem) -> bool {
        self.sender.send(item).is_ok()
    }
}

async fn run(pool: PgPool, mut receiver: mpsc::UnboundedReceiver<IngressItem>, max_batch: usize) {
    let mut buffer = Vec::with_capacity(max_batch);
    while receiver.recv_many(&mut buffer, max_batch).await > 0 {
        let items: Vec<IngressItem> = std::mem::take(&mut buffer);
        let intents: Vec<NewIntent> = items.iter().map(|i| i.intent.clone()).collect();
        // Submitters led by this node are woken directly; the rest need the
        // NOTIFY that reaches their leader's node.
        let mut quiet: Vec<SubmitterKey> = Vec::new();
        for item in &items {
            let key = item.handle.key();
            if item.handle.status().role() == Role::Leader && !quiet.contains(&key) {
                quiet.push(key);
            }
        }
        match intents::insert_queued_quiet(&pool, &intents, &quiet).await {
            Ok(outcomes) => deliver(items, outcomes),
            Err(err) if items.len() > 1 && !is_transient(&err) => {
                // One item's content may have failed the whole batch: each
                // is tried alone, so only that one hears about it.
                tracing::warn!(target: "txmgr::ingress", error = %err, creates = items.len(), "a batch of creates was refused; persisting them one by one");
                for item in items {
                    let alone = std::slice::from_ref(&item.intent);
                    match intents::insert_queued_quiet(&pool, alone, &quiet).await {
                        Ok(outcomes) => deliver(vec![item], outcomes),
                        Err(err) => refuse(item, &err),
                    }
                }
            }
            Err(err) => {
                for item in items {
                    refuse(item, &err);
                }
            }
        }
    }
}

/// Answers each create with its outcome and wakes the submitters that got work.
fn deliver(items: Vec<IngressItem>, outcomes: Vec<CreateOutcome>) {
    let mut woken: Vec<SubmitterKey> = Vec::new();
    for (item, outcome) in items.into_iter().zip(outcomes) {
        let IngressItem {
            reply,
            handle,
            permit,
            ..
        } = item;
        drop(permit);
        let created = matches!(outcome, CreateOutcome::Created(_));
        let _ = reply.send(Ok(outcome));
        if created && !woken.contains(&handle.key()) {
            woken.push(handle.key());
            handle.wake();
        }
    }
}

/// Answers a create that could not be stored: 503 (retry is safe) for a
/// database outage, 400 when the database refused this item's content.
fn refuse(item: IngressItem, err: &StoreError) {
    let IngressItem { reply, permit, .. } = item;
    drop(permit);
    let answer = if is_transient(err) {
        tracing::error!(target: "txmgr::ingress", error = %err, "persisting a create failed");
        CreateError::Unavailable("database unavailable".into())
    } else {
        CreateError::Unstorable(err.to_string())
    };
    let _ = reply.send(Err(answer));
}

/// True for failures of the database or the connection (retrying is safe),
/// false when the database refused the data itself: SQLSTATE classes 22
/// (data exception, e.g. a NUL byte in text) and 23 (integrity constraint),
/// or an intent that does not serialise.
fn is_transient(err: &StoreError) -> bool {
    match err {
        StoreError::Database(sqlx::Error::Database(db)) => !db
            .code()
            .is_some_and(|code| code.starts_with("22") || code.starts_with("23")),
        StoreError::Corrupt(_) => false,
        _ => true,
    }
}

impl SubmitterHandle {
    /// One create of this handle left the writer's queue (or was never
    /// admitted after all).
    pub(crate) fn ingress_taken(&self) {
        let _ = self
            .ingress_counter()
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| d.checked_sub(1));
    }
}
