//! The process's one `LISTEN` on the completion channel, which wakes
//! long-polling `GET /v1/completions` requests (see `completions`), and the
//! bound on how many of them wait at once (`http.max_long_polls`).

use std::{sync::Arc, time::Duration};

use sqlx::{postgres::PgListener, PgPool};
use tokio::{
    sync::{watch, OwnedSemaphorePermit, Semaphore},
    task::JoinHandle,
};
use txmgr_actors::store::completions::COMPLETION_CHANNEL;

/// Pause before reconnecting a failed listener, so a database outage does not
/// turn into a connect storm.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// What the listener task publishes to waiting requests.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Signal {
    /// Bumped on every completion, and whenever notifications
    /// may have been lost (connect, reconnect): any change means "read again".
    pub(crate) generation: u64,
    /// False while the listener has no connection: waiters cannot rely on a
    /// wake-up and re-check on the interval instead.
    pub(crate) listening: bool,
}

/// Wakes long-polling `GET /v1/completions` requests when a completion of any
/// chain commits (the feed serves every chain's rows, whatever this node
/// serves), and bounds how many wait at once. One per process, shared
/// through [`AppState`]: a single `LISTEN` connection serves every waiting
/// request, and reconnects on failure. Cheap to clone; the listener stops
/// when the last clone is dropped.
#[derive(Clone)]
pub struct CompletionNotifier {
    /// Shared with every clone; owns the listener task.
    inner: Arc<NotifierInner>,
}

/// The receiving end every request subscribes from, and the listener task.
struct NotifierInner {
    /// A receiver kept only to hand out subscriptions.
    signal: watch::Receiver<Signal>,
    /// The `LISTEN` task; aborted when the notifier goes away.
    listener: JoinHandle<()>,
    /// One permit per request allowed to wait (`http.max_long_polls`).
    waiters: Arc<Semaphore>,
    /// The number of those permits.
    max_waiters: usize,
}

impl Drop for NotifierInner {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl CompletionNotifier {
    /// Starts the process's listener on [`COMPLETION_CHANNEL`] (it holds one
    /// connection of `pool`); at most `max_waiters` requests wait at once
    /// (`http.max_long_polls`). Must be called inside a Tokio runtime. Until
    /// the listener is connected, waiters poll on the interval.
    pub fn listen(pool: PgPool, max_waiters: usize) -> Self {
        let (sender, signal) = watch::channel(Signal::default());
        let listener = tokio::spawn(listen_loop(pool, sender));
        let max_waiters = max_waiters.clamp(1, Semaphore::MAX_PERMITS);
        let waiters = Arc::new(Semaphore::new(max_waiters));
        Self {
            inner: Arc::new(NotifierInner {
                signal,
                listener,
                waiters,
                max_waiters,
            }),
        }
    }

    /// Requests waiting for a completion now (tests wait for one to be
    /// waiting before they commit, instead of sleeping).
    pub fn waiting(&self) -> usize {
        self.inner.max_waiters - self.inner.waiters.available_permits()
    }

    /// A place among the requests waiting now, or `None` when they are as
    /// many as allowed. Held until the request answers.
    pub(crate) fn wait_permit(&self) -> Option<OwnedSemaphorePermit> {
        self.inner.waiters.clone().try_acquire_owned().ok()
    }

    /// Calls `wake` after every completion commit (and after
    /// every reconnect, when some may have been missed), until the process ends.
    pub fn on_each_completion(
        &self,
        wake: impl Fn() + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let mut signal = self.subscribe();
        tokio::spawn(async move {
            while signal.changed().await.is_ok() {
                wake();
            }
        })
    }

    /// A fresh subscription; its first `changed()` fires on the next signal.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Signal> {
        let mut receiver = self.inner.signal.clone();
        receiver.mark_unchanged();
        receiver
    }
}

/// The listener task: `LISTEN`, publish every notification (whatever its
/// chain), and reconnect after failures until the pool is closed.
async fn listen_loop(pool: PgPool, sender: watch::Sender<Signal>) {
    while !pool.is_closed() {
        match subscribe_channel(&pool).await {
            Ok(mut listener) => {
                // Completions committed while we were not listening sent
                // their NOTIFY to nobody: everyone re-reads.
                sender.send_modify(|signal| {
                    signal.listening = true;
                    signal.generation += 1;
                });
                loop {
                    match listener.try_recv().await {
                        Ok(Some(_)) => {
                            sender.send_modify(|signal| signal.generation += 1);
                        }
                        // The connection dropped and was re-established
                        // (LISTEN included); what came in between is lost.
                        Ok(None) => {
                            tracing::warn!(target: "http", "completion listener reconnected");
                            sender.send_modify(|signal| signal.generation += 1);
                        }
                        Err(err) => {
                            if !pool.is_closed() {
                                tracing::warn!(target: "http", error = %err, "completion listener lost; reconnecting");
                            }
                            break;
                        }
                    }
                }
                sender.send_modify(|signal| {
                    signal.listening = false;
                    signal.generation += 1;
                });
            }
            Err(err) => {
                tracing::warn!(target: "http", error = %err, "LISTEN {COMPLETION_CHANNEL} failed");
            }
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// A listener subscribed to [`COMPLETION_CHANNEL`].
async fn subscribe_channel(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(COMPLETION_CHANNEL).await?;
    Ok(listener)
}
