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
    store::intents,
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
        let result = intents::insert_queued_quiet(&pool, &intents, &quiet).await;
        let mut woken: Vec<SubmitterKey> = Vec::new();
        match result {
            Ok(outcomes) => {
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
            Err(err) => {
                tracing::error!(target: "txmgr::ingress", error = %err, creates = items.len(), "persisting creates failed");
                for item in items {
                    item.handle.ingress_taken();
                    let _ = item
                        .reply
                        .send(Err(CreateError::Unavailable("database unavailable".into())));
                }
            }
        }
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
