//! The node's ingress writer: creates for *all* submitters of this node are
//! persisted together, many per INSERT transaction (group commit across
//! submitters), so a hundred submitters with one create each cost one commit,
//! not a hundred. Each handle still bounds its own queue (capacity per
//! submitter) before anything reaches this writer.

use std::sync::atomic::Ordering;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::{status::Role, SubmitterHandle};
use crate::{
    domain::{CreateError, CreateOutcome, NewIntent, SubmitterKey},
    store::{intents, StoreError},
};

/// Answer channel of one create.
pub(crate) type Reply = oneshot::Sender<Result<CreateOutcome, CreateError>>;

/// One create waiting to be persisted.
#[derive(Debug)]
pub(crate) struct IngressItem {
    pub(crate) intent: NewIntent,
    pub(crate) reply: Reply,
    pub(crate) handle: SubmitterHandle,
}

/// Sends creates to the node's writer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct IngressWriter {
    sender: mpsc::UnboundedSender<IngressItem>,
}

impl IngressWriter {
    /// Starts the writer task: batches of up to `max_batch` creates, one
    /// transaction each.
    pub fn start(pool: PgPool, max_batch: usize) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, receiver, max_batch.max(1)));
        Self { sender }
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
        item.handle.ingress_taken();
        let created = matches!(outcome, CreateOutcome::Created(_));
        let _ = item.reply.send(Ok(outcome));
        if created && !woken.contains(&item.handle.key()) {
            woken.push(item.handle.key());
            item.handle.wake();
        }
    }
}

/// Answers a create that could not be stored: 503 (retry is safe) for a
/// database outage, 400 when the database refused this item's content.
fn refuse(item: IngressItem, err: &StoreError) {
    item.handle.ingress_taken();
    let answer = if is_transient(err) {
        tracing::error!(target: "txmgr::ingress", error = %err, "persisting a create failed");
        CreateError::Unavailable("database unavailable".into())
    } else {
        CreateError::Unstorable(err.to_string())
    };
    let _ = item.reply.send(Err(answer));
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
    /// One create of this handle left the writer's queue.
    pub(crate) fn ingress_taken(&self) {
        let _ = self
            .ingress_counter()
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| d.checked_sub(1));
    }
}
