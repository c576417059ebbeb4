//! The WebhookActor: one per configured webhook on every node; the one that
//! holds the webhook's lease delivers, the others only try for the lease.
//!
//! ```text
//! Tick/Wake ─► lease (acquire/renew/hand over) ─► read feed after read_to ─► Window
//!                                                                │ heads (one per submitter)
//!                              Attempted ◄── HTTP attempt task ◄─┘ (≤ concurrency at once)
//!                                  │ delivered / dead-lettered ─► Flush: fenced commit of
//!                                  │ retry ─► backoff timer         cursor + markers + dead letters
//! ```
//!
//! A submitter's next event is sent only after the previous one's outcome
//! is committed, so a holder that dies re-sends at most the events that
//! were in flight (at most one per submitter).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use opentelemetry::KeyValue;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::{
    attempt::{self, AttemptOutcome, AttemptRequest},
    settings::WebhookSettings,
    window::{Pushed, Window, PER_SUBMITTER},
    WebhookEnv,
};
use crate::{
    domain::FeedEvent,
    intent_trace::{self, TraceParent},
    metrics::{
        WEBHOOK_ATTEMPTS, WEBHOOK_ATTEMPT_SECONDS, WEBHOOK_DEAD_LETTERS, WEBHOOK_DELIVERY_DELAY,
        WEBHOOK_PENDING,
    },
    store::{
        completions::{self, CompletionRow, FeedCursor},
        webhook_lease::{self, WebhookKey},
        webhooks::{self, NewDeadLetter, Progress},
        StoreResult,
    },
};

mod delivery;

/// Events read ahead of the durable cursor at most.
const WINDOW_MAX: usize = 2000;
/// Rows read per feed query at most.
const READ_PAGE: u32 = 500;
/// How often the holder looks for dead letters an operator asked to redeliver.
const REDELIVERY_CHECK: Duration = Duration::from_secs(1);
/// Retry of a failed commit.
const COMMIT_RETRY: Duration = Duration::from_millis(500);

/// Messages of a [`WebhookActor`].
#[derive(Debug)]
pub enum WebhookMsg {
    /// Periodic: lease upkeep, read, redeliveries, dispatch.
    Tick,
    /// The feed has new rows (NOTIFY) or a retry is due.
    Wake,
    /// An HTTP attempt ended.
    Attempted(AttemptReport),
    /// Commit what is done.
    Flush,
    /// New settings (reload); the lease and cursor stay.
    Reconfigure(Arc<WebhookSettings>),
}

/// Which queue an attempt belongs to: a submitter's events (in order), or
/// one dead letter being redelivered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Lane {
    /// A submitter's events (lower-case hex address).
    Submitter(String),
    /// A dead letter by id.
    DeadLetter(i64),
}

/// How an attempt ended, sent back to the actor.
#[derive(Debug)]
pub struct AttemptReport {
    epoch: u64,
    lane: Lane,
    cursor: FeedCursor,
    outcome: AttemptOutcome,
    elapsed: Duration,
}

/// An event ready to send: the body is fixed for all its attempts.
#[derive(Debug)]
struct Prepared {
    feed_seq: i64,
    delivery_id: String,
    event: FeedEvent,
    body: Arc<[u8]>,
    completed_at: chrono::DateTime<Utc>,
    /// The intent's stored trace context, when it is traced.
    trace: Option<TraceParent>,
}

/// Attempts made so far for one event.
#[derive(Debug, Clone)]
struct Tries {
    made: u32,
    next_at: Instant,
    last_status: Option<u16>,
    last_error: String,
}

/// The held lease.
#[derive(Debug, Clone, Copy)]
struct Held {
    token: i64,
    valid_until: Instant,
    renewed_at: Instant,
    since: Instant,
}

/// The actor.
#[derive(Debug)]
pub struct WebhookActor;

/// Its arguments.
#[derive(Debug)]
pub struct WebhookArgs {
    /// The webhook.
    pub settings: Arc<WebhookSettings>,
    /// What every webhook actor of the node shares.
    pub env: Arc<WebhookEnv>,
}

/// Its state.
#[derive(Debug)]
pub struct WebhookState {
    settings: Arc<WebhookSettings>,
    env: Arc<WebhookEnv>,
    key: WebhookKey,
    client: reqwest::Client,
    held: Option<Held>,
    next_lease_try: Instant,
    /// Incremented per lease taken: reports from an older one are dropped.
    epoch: u64,
    window: Window,
    prepared: HashMap<FeedCursor, Arc<Prepared>>,
    tries: HashMap<FeedCursor, Tries>,
    /// Lanes with an attempt running, or an outcome not yet committed.
    busy: HashSet<Lane>,
    uncommitted: Vec<Lane>,
    redeliveries: HashMap<i64, (FeedCursor, Arc<Prepared>)>,
    progress: Progress,
    flush_queued: bool,
    next_redelivery_check: Instant,
    /// Another node is preferred: no new attempt starts, and the lease is
    /// released once every running one is booked and committed, so a
    /// voluntary hand-over repeats nothing.
    draining: bool,
}

/// The HTTP client of one webhook: the node's TLS policy (public roots and
/// the webhook's `ca_file`), its timeout, no redirects (a 3xx is an answer,
/// not retried). Any failure fails the actor's start (the supervisor retries
/// with backoff): a client without the timeout, the redirect policy or the
/// webhook's CA would be a weaker one, never a fallback.
fn client(settings: &WebhookSettings) -> Result<reqwest::Client, ActorProcessingErr> {
    let tls = crate::tls::client_config(settings.ca_file.as_deref())
        .map_err(|err| format!("webhook {}: ca_file unusable: {err}", settings.name))?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("txmgr/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("webhook {}: HTTP client: {err}", settings.name).into())
}

impl Actor for WebhookActor {
    type Msg = WebhookMsg;
    type State = WebhookState;
    type Arguments = WebhookArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<WebhookMsg>,
        args: WebhookArgs,
    ) -> Result<WebhookState, ActorProcessingErr> {
        myself.send_interval(args.env.tick, || WebhookMsg::Tick);
        // The first look at the lease now, not one tick later.
        myself.send_message(WebhookMsg::Tick)?;
        let now = Instant::now();
        Ok(WebhookState {
            key: WebhookKey {
                chain_id: args.env.chain_id,
                name: args.settings.name.clone(),
            },
            client: client(&args.settings)?,
            settings: args.settings,
            env: args.env,
            held: None,
            next_lease_try: now,
            epoch: 0,
            window: Window::default(),
            prepared: HashMap::new(),
            tries: HashMap::new(),
            busy: HashSet::new(),
            uncommitted: Vec::new(),
            redeliveries: HashMap::new(),
            progress: Progress::default(),
            flush_queued: false,
            next_redelivery_check: now,
            draining: false,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<WebhookMsg>,
        state: &mut WebhookState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(held) = state.held.take() {
            // Best effort: a later holder resumes from the durable cursor
            // either way; releasing only saves it the expiry wait.
            let _ = state.commit(held).await;
            let _ =
                webhook_lease::release(&state.env.pool, &state.key, &state.env.owner, held.token)
                    .await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<WebhookMsg>,
        message: WebhookMsg,
        state: &mut WebhookState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WebhookMsg::Tick | WebhookMsg::Wake => {
                state.upkeep(&myself).await;
                if let Err(err) = state.fill(&myself).await {
                    tracing::warn!(target: "txmgr::webhook", webhook = %state.key.name, error = %err, "reading the feed failed");
                }
                state.dispatch(&myself);
            }
            WebhookMsg::Attempted(report) => {
                state.attempted(&myself, report);
                if !state.flush_queued {
                    state.flush_queued = true;
                    let _ = myself.send_message(WebhookMsg::Flush);
                }
            }
            WebhookMsg::Flush => {
                state.flush_queued = false;
                if let Some(held) = state.held {
                    match state.commit(held).await {
                        Ok(()) => state.dispatch(&myself),
                        Err(err) => {
                            tracing::warn!(target: "txmgr::webhook", webhook = %state.key.name, error = %err, "committing webhook progress failed; retrying");
                            state.flush_queued = true;
                            myself.send_after(COMMIT_RETRY, || WebhookMsg::Flush);
                        }
                    }
                }
            }
            WebhookMsg::Reconfigure(settings) => {
                if settings.url != state.settings.url
                    || settings.timeout != state.settings.timeout
                    || settings.ca_file != state.settings.ca_file
                {
                    state.client = client(&settings)?;
                }
                state.settings = settings;
            }
        }
        Ok(())
    }
}

impl WebhookState {
    /// Takes, renews or hands over the lease as due.
    async fn upkeep(&mut self, myself: &ActorRef<WebhookMsg>) {
        let now = Instant::now();
        let timing = self.env.lease;
        // Owned: the hand-over path commits (a mutable borrow) meanwhile.
        let env = self.env.clone();
        let me: &str = &env.owner.node_id;
        if let Some(held) = self.held {
            let hand_over_to = self.env.membership.hand_over_name_to(
                &self.key.name,
                me,
                now.duration_since(held.since),
            );
            self.draining = hand_over_to.is_some();
            if let Some(to) = hand_over_to {
                // Attempts still running would reach the receiver after
                // the release and be sent again by the next holder: wait
                // until each is booked and committed (each is bounded by
                // the webhook's timeout), renewing meanwhile.
                let _ = self.commit(held).await;
                if self.busy.is_empty() {
                    tracing::info!(target: "txmgr::webhook", webhook = %self.key.name, to, "handing the webhook to its preferred node");
                    let _ = webhook_lease::release(
                        &self.env.pool,
                        &self.key,
                        &self.env.owner,
                        held.token,
                    )
                    .await;
                    self.drop_lease();
                    self.next_lease_try = now + timing.duration;
                    return;
                }
                tracing::debug!(target: "txmgr::webhook", webhook = %self.key.name, to, running = self.busy.len(), "draining before handing the webhook over");
            }
            if now < held.renewed_at + timing.renew_interval {
                return;
            }
        } else if now < self.next_lease_try {
            return;
        }
        let defer = if self.held.is_some() {
            Duration::ZERO
        } else {
            self.env.membership.defer_for_name(&self.key.name, me)
        };
        let sent_at = Instant::now();
        let outcome = webhook_lease::acquire_or_renew(
            &self.env.pool,
            &self.key,
            &self.env.owner,
            timing,
            defer,
            self.settings.start_at_end,
        )
        .await;
        match outcome {
            Ok(Some(lease)) => {
                let continuing = self
                    .held
                    .is_some_and(|held| held.token == lease.token && !lease.fresh);
                if continuing {
                    if let Some(held) = self.held.as_mut() {
                        held.valid_until = lease.valid_until;
                        held.renewed_at = sent_at;
                    }
                } else if let Err(err) = self.take_up(lease.token, lease.valid_until, sent_at).await
                {
                    tracing::warn!(target: "txmgr::webhook", webhook = %self.key.name, error = %err, "resuming the webhook failed; will retry");
                    self.drop_lease();
                } else {
                    tracing::info!(target: "txmgr::webhook", webhook = %self.key.name, token = lease.token, cursor = %self.window.durable(), "delivering for the webhook");
                    let _ = myself.send_message(WebhookMsg::Wake);
                }
            }
            Ok(None) => {
                if self.held.is_some() {
                    tracing::warn!(target: "txmgr::webhook", webhook = %self.key.name, "webhook lease lost");
                    self.drop_lease();
                }
                self.next_lease_try = now + timing.renew_interval;
            }
            Err(err) => {
                tracing::warn!(target: "txmgr::webhook", webhook = %self.key.name, error = %err, "webhook lease request failed");
                self.next_lease_try = now + timing.renew_interval;
                if self.held.is_some_and(|h| Instant::now() >= h.valid_until) {
                    self.drop_lease();
                }
            }
        }
    }

    /// Starts delivering with a newly granted lease, from the durable cursor.
    async fn take_up(&mut self, token: i64, valid_until: Instant, at: Instant) -> StoreResult<()> {
        self.drop_lease();
        let resume = webhooks::resume(&self.env.pool, &self.key).await?;
        self.window = Window::resume(resume.cursor, resume.done);
        self.held = Some(Held {
            token,
            valid_until,
            renewed_at: at,
            since: at,
        });
        Ok(())
    }

    /// Forgets everything tied to the lease; attempts still running report
    /// to an old epoch and are ignored.
    fn drop_lease(&mut self) {
        self.held = None;
        self.epoch += 1;
        self.window = Window::default();
        self.prepared.clear();
        self.tries.clear();
        self.busy.clear();
        self.uncommitted.clear();
        self.redeliveries.clear();
        self.progress = Progress::default();
        self.draining = false;
        metrics::gauge!(WEBHOOK_PENDING, "webhook" => self.key.name.clone()).set(0.0);
    }

    fn may_send(&self) -> bool {
        self.held.is_some_and(|h| Instant::now() < h.valid_until)
    }
}
