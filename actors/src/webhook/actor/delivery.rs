//! The delivering half of the WebhookActor: the window is filled from the
//! feed, heads are dispatched as HTTP attempts, their outcomes are
//! recorded, and the finished prefix is committed under the lease's token.

use super::*;

impl WebhookState {
    /// Reads new feed rows into the window, and dead letters asked for.
    pub(super) async fn fill(&mut self, myself: &ActorRef<WebhookMsg>) -> StoreResult<()> {
        if !self.may_send() {
            return Ok(());
        }
        let room = WINDOW_MAX.saturating_sub(self.window.len());
        if room > 0 {
            let limit = READ_PAGE.min(u32::try_from(room).unwrap_or(READ_PAGE));
            let after = Some(self.window.read_to());
            let (rows, _) = completions::read(&self.env.pool, after, limit).await?;
            let traces = self.traces_of(rows.iter()).await;
            let mut passed_over = false;
            for row in rows {
                let Ok(cursor) = FeedCursor::parse(&row.cursor) else {
                    continue;
                };
                let wanted = self.settings.wants(row.state, row.chain_id, &row.submitter);
                match self.window.push(cursor, &row.submitter, wanted) {
                    Pushed::Waits => {
                        self.prepared
                            .insert(cursor, Arc::new(self.prepare(&row, &traces)));
                    }
                    Pushed::Done => passed_over = true,
                    Pushed::Parked => {}
                }
            }
            if passed_over && self.window.progress().cursor.is_some() && !self.flush_queued {
                // Only passed-over rows moved the prefix: commit it now, so
                // the ops view's lag does not count them.
                self.flush_queued = true;
                let _ = myself.send_message(WebhookMsg::Flush);
            }
        }
        self.refill_parked().await?;
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
                let rows = completions::read_seqs(&self.env.pool, &seqs).await?;
                let traces = self.traces_of(rows.iter().map(|(_, row)| row)).await;
                for asked in new {
                    if let Some((cursor, row)) =
                        rows.iter().find(|(c, _)| c.seq() == asked.feed_seq)
                    {
                        let prepared = Arc::new(self.prepare(row, &traces));
                        self.redeliveries.insert(asked.id, (*cursor, prepared));
                    }
                }
            }
        }
        metrics::gauge!(WEBHOOK_PENDING, "webhook" => self.key.name.clone())
            .set(self.window.len() as f64);
        Ok(())
    }

    /// Reads again the events of each parked submitter whose queue has
    /// emptied (up to [`PER_SUBMITTER`] of them, in order).
    async fn refill_parked(&mut self) -> StoreResult<()> {
        let limit = u32::try_from(PER_SUBMITTER).unwrap_or(u32::MAX);
        for (submitter, from) in self.window.due_for_refill() {
            let rows = completions::read_submitter(
                &self.env.pool,
                &submitter,
                from,
                self.window.read_to(),
                limit,
            )
            .await?;
            let complete = rows.len() < PER_SUBMITTER;
            let wanted: Vec<(FeedCursor, bool)> = rows
                .iter()
                .map(|(cursor, row)| {
                    let wanted = self.settings.wants(row.state, row.chain_id, &row.submitter);
                    (*cursor, wanted)
                })
                .collect();
            let waiting = self.window.refill(&submitter, &wanted, complete);
            let traces = self.traces_of(rows.iter().map(|(_, row)| row)).await;
            for (cursor, row) in &rows {
                if waiting.contains(cursor) {
                    self.prepared
                        .insert(*cursor, Arc::new(self.prepare(row, &traces)));
                }
            }
        }
        Ok(())
    }

    /// The stored trace contexts of the rows' intents (none while traces
    /// are off): each delivery is a span of its intent's trace.
    async fn traces_of<'r>(
        &self,
        rows: impl Iterator<Item = &'r CompletionRow>,
    ) -> HashMap<Uuid, TraceParent> {
        if !intent_trace::enabled() {
            return HashMap::new();
        }
        let ids: Vec<Uuid> = rows.filter_map(|row| row.tx_id).collect();
        crate::store::trace_context::parents(&self.env.pool, &ids).await
    }

    pub(super) fn prepare(
        &self,
        row: &CompletionRow,
        traces: &HashMap<Uuid, TraceParent>,
    ) -> Prepared {
        let delivery_id = format!("{}:{}", self.key.name, row.cursor);
        let envelope = txmgr_api::WebhookEvent {
            id: delivery_id.clone(),
            webhook: self.key.name.clone(),
            row: row.clone(),
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
            trace: row.tx_id.and_then(|id| traces.get(&id).copied()),
        }
    }

    /// Starts attempts for the submitters' heads and redeliveries whose time has come.
    pub(super) fn dispatch(&mut self, myself: &ActorRef<WebhookMsg>) {
        if !self.may_send() || self.draining {
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

    pub(super) fn spawn_attempt(
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
        let webhook = self.key.name.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let span = prepared.trace.and_then(|parent| {
                intent_trace::begin_client(
                    "txmgr.webhook.delivery",
                    &parent,
                    vec![
                        KeyValue::new("txmgr.webhook", webhook),
                        KeyValue::new("txmgr.event", prepared.event.as_str()),
                        KeyValue::new("txmgr.attempt", i64::from(attempt)),
                    ],
                )
            });
            let traceparent = span.as_ref().and_then(|s| s.header());
            let outcome = attempt::send(
                &client,
                &AttemptRequest {
                    url: &settings.url,
                    secret: settings.secret.expose(),
                    delivery_id: &prepared.delivery_id,
                    event: prepared.event.as_str(),
                    attempt,
                    body: &prepared.body,
                    traceparent: traceparent.as_deref(),
                },
            )
            .await;
            if let Some(span) = span {
                let (status, error) = match &outcome {
                    AttemptOutcome::Delivered => (None, None),
                    AttemptOutcome::Retry { status, error, .. } => (*status, Some(error.clone())),
                    AttemptOutcome::Refused { status, error } => {
                        (Some(*status), Some(error.clone()))
                    }
                };
                let attributes = status
                    .map(|s| vec![KeyValue::new("http.response.status_code", i64::from(s))])
                    .unwrap_or_default();
                span.end(attributes, error);
            }
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
    pub(super) fn attempted(&mut self, myself: &ActorRef<WebhookMsg>, report: AttemptReport) {
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

    pub(super) fn prepared_of(&self, lane: &Lane, cursor: FeedCursor) -> Option<Arc<Prepared>> {
        match lane {
            Lane::Submitter(_) => self.prepared.get(&cursor).cloned(),
            Lane::DeadLetter(id) => self.redeliveries.get(id).map(|(_, p)| p.clone()),
        }
    }

    /// The event of `lane` is finished: delivered (`failure` none) or given
    /// up on. Its lane stays busy until the outcome is committed.
    pub(super) fn done(&mut self, lane: Lane, cursor: FeedCursor, failure: Option<String>) {
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
    pub(super) async fn commit(&mut self, held: Held) -> StoreResult<()> {
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
