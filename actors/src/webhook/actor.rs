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
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::Serialize;

use super::{
    attempt::{self, AttemptOutcome, AttemptRequest},
    settings::WebhookSettings,
    window::Window,
    WebhookEnv,
};
use crate::{
    domain::FeedEvent,
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
}

/// Attempts made so far for one event.
#[derive(Debug, Clone)]
struct Tries {
    made: u32,
    next_at: Instant,
    last_status: Option<u16>,
    last_error: String,
}

/// What receivers get: the delivery id, the webhook, the chain and the
/// feed row's fields.
#[derive(Serialize)]
struct Envelope<'a> {
    id: &'a str,
    webhook: &'a str,
    chain_id: u64,
    #[serde(flatten)]
    event: &'a CompletionRow,
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
}

/// The HTTP client of one webhook: the node's TLS policy (public roots and
/// the webhook's `ca_file`), its timeout, no redirects (a 3xx is an answer,
/// not retried). The CA file was checked when the settings were resolved;
/// should it have become unreadable since, the public roots alone are used.
fn client(settings: &WebhookSettings) -> reqwest::Client {
    let tls = crate::tls::client_config(settings.ca_file.as_deref())
        .or_else(|err| {
            tracing::error!(target: "txmgr::webhook", webhook = %settings.name, error = %err, "webhook ca_file unusable; trusting the public roots only");
            crate::tls::client_config(None)
        });
    let builder = match tls {
        Ok(tls) => {
            reqwest::Client::builder().tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
        }
        Err(_) => reqwest::Client::builder(),
    };
    builder
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("txmgr/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
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
            client: client(&args.settings),
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
                    state.client = client(&settings);
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
        let me: &str = &self.env.owner.node_id;
        if let Some(held) = self.held {
            if let Some(to) = self.env.membership.hand_over_name_to(
                &self.key.name,
                me,
                now.duration_since(held.since),
            ) {
                tracing::info!(target: "txmgr::webhook", webhook = %self.key.name, to, "handing the webhook to its preferred node");
                let _ = self.commit(held).await;
                let _ =
                    webhook_lease::release(&self.env.pool, &self.key, &self.env.owner, held.token)
                        .await;
                self.drop_lease();
                self.next_lease_try = now + timing.duration;
                return;
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
        metrics::gauge!(WEBHOOK_PENDING, "webhook" => self.key.name.clone()).set(0.0);
    }

    fn may_send(&self) -> bool {
        self.held.is_some_and(|h| Instant::now() < h.valid_until)
    }

    /// Reads new feed rows into the window, and dead letters asked for.
    async fn fill(&mut self, myself: &ActorRef<WebhookMsg>) -> StoreResult<()> {
        if !self.may_send() {
            return Ok(());
        }
        let room = WINDOW_MAX.saturating_sub(self.window.len());
        if room > 0 {
            let limit = READ_PAGE.min(u32::try_from(room).unwrap_or(READ_PAGE));
            let after = Some(self.window.read_to());
            let (rows, _) =
                completions::read(&self.env.pool, self.env.chain_id, after, limit).await?;
            let mut passed_over = false;
            for row in rows {
                let Ok(cursor) = FeedCursor::parse(&row.cursor) else {
                    continue;
                };
                let wanted = self.settings.wants(row.state, &row.submitter);
                if self.window.push(cursor, &row.submitter, wanted) {
                    self.prepared.insert(cursor, Arc::new(self.prepare(&row)));
                } else {
                    passed_over = true;
                }
            }
            if passed_over && self.window.progress().cursor.is_some() && !self.flush_queued {
                // Only passed-over rows moved the prefix: commit it now, so
                // the ops view's lag does not count them.
                self.flush_queued = true;
                let _ = myself.send_message(WebhookMsg::Flush);
            }
        }
        if Instant::now() >= self.next_redelivery_check {
            self.next_redelivery_check = Instant::now() + REDELIVERY_CHECK;
            let asked = webhooks::redeliveries(&self.env.pool, &self.key, 100).await?;
            // Skip those running, and those finished but not yet committed
            // (their row still asks for a redelivery until the commit).
            let new: Vec<_> = asked
                .into_iter()
                .filter(|a| {
                    !self.redeliveries.contains_key(&a.id)
                        && !self.progress.redelivered.contains(&a.id)
                        && !self
                            .progress
                            .redelivery_failed
                            .iter()
                            .any(|(id, _)| *id == a.id)
                })
                .collect();
            if !new.is_empty() {
                let seqs: Vec<i64> = new.iter().map(|a| a.feed_seq).collect();
                let rows = completions::read_seqs(&self.env.pool, self.env.chain_id, &seqs).await?;
                for asked in new {
                    if let Some((cursor, row)) =
                        rows.iter().find(|(c, _)| c.seq() == asked.feed_seq)
                    {
                        let prepared = Arc::new(self.prepare(row));
                        self.redeliveries.insert(asked.id, (*cursor, prepared));
                    }
                }
            }
        }
        metrics::gauge!(WEBHOOK_PENDING, "webhook" => self.key.name.clone())
            .set(self.window.len() as f64);
        Ok(())
    }

    fn prepare(&self, row: &CompletionRow) -> Prepared {
        let delivery_id = format!("{}:{}", self.key.name, row.cursor);
        let envelope = Envelope {
            id: &delivery_id,
            webhook: &self.key.name,
            chain_id: self.env.chain_id.get(),
            event: row,
        };
        // Serialising plain data to a Vec cannot fail.
        let body = serde_json::to_vec(&envelope).unwrap_or_default();
        let feed_seq = FeedCursor::parse(&row.cursor).map_or(0, |c| c.seq());
        Prepared {
            feed_seq,
            delivery_id,
            event: row.state,
            body: body.into(),
            completed_at: row.completed_at,
        }
    }

    /// Starts attempts for the submitters' heads and redeliveries whose time has come.
    fn dispatch(&mut self, myself: &ActorRef<WebhookMsg>) {
        if !self.may_send() {
            return;
        }
        let now = Instant::now();
        let mut ready: Vec<(Lane, FeedCursor, Arc<Prepared>)> = Vec::new();
        for (submitter, cursor) in self.window.heads() {
            let lane = Lane::Submitter(submitter);
            if let Some(prepared) = self.prepared.get(&cursor) {
                ready.push((lane, cursor, prepared.clone()));
            }
        }
        for (id, (cursor, prepared)) in &self.redeliveries {
            ready.push((Lane::DeadLetter(*id), *cursor, prepared.clone()));
        }
        // Oldest event first: with more submitters than `concurrency`, none
        // waits behind others that keep getting new events.
        ready.sort_by_key(|(_, cursor, _)| *cursor);
        for (lane, cursor, prepared) in ready {
            if self.busy.len() >= self.settings.concurrency.max(1) {
                break;
            }
            if self.busy.contains(&lane) {
                continue;
            }
            let made = match self.tries.get(&cursor) {
                Some(tries) if tries.next_at > now => continue,
                Some(tries) => tries.made,
                None => 0,
            };
            self.busy.insert(lane.clone());
            self.spawn_attempt(myself, lane, cursor, prepared, made + 1);
        }
    }

    fn spawn_attempt(
        &self,
        myself: &ActorRef<WebhookMsg>,
        lane: Lane,
        cursor: FeedCursor,
        prepared: Arc<Prepared>,
        attempt: u32,
    ) {
        let client = self.client.clone();
        let settings = self.settings.clone();
        let epoch = self.epoch;
        let myself = myself.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = attempt::send(
                &client,
                &AttemptRequest {
                    url: &settings.url,
                    secret: settings.secret.expose(),
                    delivery_id: &prepared.delivery_id,
                    event: prepared.event.as_str(),
                    attempt,
                    body: &prepared.body,
                },
            )
            .await;
            let _ = myself.send_message(WebhookMsg::Attempted(AttemptReport {
                epoch,
                lane,
                cursor,
                outcome,
                elapsed: started.elapsed(),
            }));
        });
    }

    /// Books an attempt's outcome: done (delivered or given up on) waits
    /// for the next commit; a retry waits for its backoff.
    fn attempted(&mut self, myself: &ActorRef<WebhookMsg>, report: AttemptReport) {
        if report.epoch != self.epoch {
            return;
        }
        let name = self.key.name.clone();
        metrics::histogram!(WEBHOOK_ATTEMPT_SECONDS, "webhook" => name.clone())
            .record(report.elapsed.as_secs_f64());
        let tries = self.tries.entry(report.cursor).or_insert(Tries {
            made: 0,
            next_at: Instant::now(),
            last_status: None,
            last_error: String::new(),
        });
        tries.made += 1;
        let made = tries.made;
        let result = match &report.outcome {
            AttemptOutcome::Delivered => "delivered",
            AttemptOutcome::Retry { .. } => "retry",
            AttemptOutcome::Refused { .. } => "refused",
        };
        metrics::counter!(WEBHOOK_ATTEMPTS, "webhook" => name.clone(), "result" => result)
            .increment(1);
        let give_up = match report.outcome {
            AttemptOutcome::Delivered => {
                self.progress.delivered += 1;
                let prepared = self.prepared_of(&report.lane, report.cursor);
                if let Some(prepared) = prepared {
                    let delay = (Utc::now() - prepared.completed_at).num_milliseconds();
                    metrics::histogram!(WEBHOOK_DELIVERY_DELAY, "webhook" => name)
                        .record(delay.max(0) as f64 / 1000.0);
                }
                self.done(report.lane, report.cursor, None);
                return;
            }
            AttemptOutcome::Retry {
                status,
                error,
                retry_after,
            } => {
                tries.last_status = status;
                tries.last_error = error.clone();
                self.progress.failed_attempts += 1;
                self.progress.last_error = Some(error.clone());
                if made < self.settings.max_attempts.max(1) {
                    let wait = attempt::backoff(
                        made + 1,
                        self.settings.backoff_initial,
                        self.settings.backoff_max,
                        retry_after,
                    );
                    tries.next_at = Instant::now() + wait;
                    self.busy.remove(&report.lane);
                    myself.send_after(wait, || WebhookMsg::Wake);
                    return;
                }
                format!("{error} (after {made} attempts)")
            }
            AttemptOutcome::Refused { status, error } => {
                tries.last_status = Some(status);
                tries.last_error = error.clone();
                self.progress.failed_attempts += 1;
                self.progress.last_error = Some(error.clone());
                error
            }
        };
        metrics::counter!(WEBHOOK_DEAD_LETTERS, "webhook" => name).increment(1);
        self.done(report.lane, report.cursor, Some(give_up));
    }

    fn prepared_of(&self, lane: &Lane, cursor: FeedCursor) -> Option<Arc<Prepared>> {
        match lane {
            Lane::Submitter(_) => self.prepared.get(&cursor).cloned(),
            Lane::DeadLetter(id) => self.redeliveries.get(id).map(|(_, p)| p.clone()),
        }
    }

    /// The event of `lane` is finished: delivered (`failure` none) or given
    /// up on. Its lane stays busy until the outcome is committed.
    fn done(&mut self, lane: Lane, cursor: FeedCursor, failure: Option<String>) {
        let tries = self.tries.remove(&cursor);
        match &lane {
            Lane::Submitter(submitter) => {
                if let (Some(error), Some(prepared)) = (&failure, self.prepared.get(&cursor)) {
                    self.progress.dead.push(NewDeadLetter {
                        feed_seq: prepared.feed_seq,
                        delivery_id: prepared.delivery_id.clone(),
                        attempts: tries.as_ref().map_or(1, |t| t.made),
                        last_status: tries.as_ref().and_then(|t| t.last_status),
                        last_error: error.clone(),
                    });
                }
                self.prepared.remove(&cursor);
                self.window.finish(submitter, cursor);
            }
            Lane::DeadLetter(id) => {
                match failure {
                    None => self.progress.redelivered.push(*id),
                    Some(error) => self.progress.redelivery_failed.push((*id, error)),
                }
                self.redeliveries.remove(id);
            }
        }
        self.uncommitted.push(lane);
    }

    /// Commits the window's progress and the booked outcomes, fenced by the
    /// lease; frees the lanes they held. A fenced commit ends the lease.
    async fn commit(&mut self, held: Held) -> StoreResult<()> {
        let window = self.window.progress();
        let mut progress = std::mem::take(&mut self.progress);
        progress.cursor = window.cursor;
        progress.done = window.done.clone();
        if progress.is_empty() && self.uncommitted.is_empty() {
            return Ok(());
        }
        match webhooks::commit(&self.env.pool, &self.key, held.token, &progress).await {
            Ok(true) => {
                self.window.committed(&window);
                for lane in self.uncommitted.drain(..) {
                    self.busy.remove(&lane);
                }
                metrics::gauge!(WEBHOOK_PENDING, "webhook" => self.key.name.clone())
                    .set(self.window.len() as f64);
                Ok(())
            }
            Ok(false) => {
                tracing::warn!(target: "txmgr::webhook", webhook = %self.key.name, "webhook lease taken over: progress refused (fenced)");
                self.drop_lease();
                Ok(())
            }
            Err(err) => {
                // Put the booked outcomes back for the retry.
                progress.cursor = None;
                progress.done.clear();
                self.progress.absorb(progress);
                Err(err)
            }
        }
    }
}
