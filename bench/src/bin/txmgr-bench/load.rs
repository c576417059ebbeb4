//! Driving the node over HTTP: closed-loop creates at a fixed concurrency
//! while PostgreSQL is polled for TRACKING, and open-loop creates at a fixed
//! rate for ack latency.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use alloy::primitives::Address;
use anyhow::{bail, Context};
use serde_json::json;
use tokio::task::JoinSet;

use crate::{node::BenchDb, report::LatencyStats, SINK};

/// How often PostgreSQL is asked how many intents are TRACKING.
const TRACKING_POLL: Duration = Duration::from_millis(20);

/// One batch of creates to send.
pub(crate) struct CreateBatch {
    /// `POST` target, `…/v1/transactions`.
    pub(crate) url: String,
    /// Pre-serialised bodies, so the client spends no time building JSON
    /// while the clock runs (it shares the CPU with the node).
    pub(crate) bodies: Arc<Vec<String>>,
}

impl CreateBatch {
    /// `count` transfers spread round-robin over `submitters`, each with a
    /// unique `request_id` `<tag>-<i>`; `gas_limit` omitted when `None`.
    /// With `chain_ids`, each round over the submitters goes to the next
    /// chain (`count = submitters × chains` gives every pair one); without,
    /// `chain_id` is omitted (the node's one chain).
    pub(crate) fn new(
        base_url: &str,
        submitters: &[Address],
        chain_ids: &[u64],
        count: usize,
        tag: &str,
        gas_limit: Option<u64>,
    ) -> CreateBatch {
        let bodies = (0..count)
            .map(|i| {
                let mut body = json!({
                    "submitter": format!("{:#x}", submitters[i % submitters.len()]),
                    "request_id": format!("{tag}-{i}"),
                    "to": SINK,
                    "value": "1",
                });
                if !chain_ids.is_empty() {
                    body["chain_id"] = json!(chain_ids[(i / submitters.len()) % chain_ids.len()]);
                }
                if let Some(gas) = gas_limit {
                    body["gas_limit"] = json!(gas);
                }
                body.to_string()
            })
            .collect();
        CreateBatch {
            url: format!("{base_url}/v1/transactions"),
            bodies: Arc::new(bodies),
        }
    }
}

/// What the client saw of the creates.
pub(crate) struct Acks {
    /// Latency of each answered create.
    pub(crate) latencies: Vec<Duration>,
    /// First create sent → last answer received.
    pub(crate) elapsed: Duration,
    /// Creates answered 202.
    pub(crate) accepted: usize,
    /// Non-202 answers and transport failures, first few kept.
    pub(crate) errors: Vec<String>,
}

/// Sends every body at `concurrency` with one keep-alive client pool.
pub(crate) async fn closed_loop(
    client: &reqwest::Client,
    batch: &CreateBatch,
    concurrency: usize,
) -> Acks {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (client, next, bodies, url) = (
            client.clone(),
            next.clone(),
            batch.bodies.clone(),
            batch.url.clone(),
        );
        workers.spawn(async move {
            let mut acks = Acks::empty();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else {
                    return acks;
                };
                let sent = Instant::now();
                let result = post(&client, &url, body.clone()).await;
                acks.record(sent.elapsed(), result);
            }
        });
    }
    let mut all = Acks::empty();
    while let Some(joined) = workers.join_next().await {
        match joined {
            Ok(acks) => all.merge(acks),
            Err(e) => all.errors.push(format!("client task failed: {e}")),
        }
    }
    all.elapsed = started.elapsed();
    all
}

/// Sends the bodies open-loop at `rate` per second; each latency counts from
/// the request's scheduled time, so a stalled server cannot hide its stall
/// by slowing the sender (no coordinated omission).
pub(crate) async fn open_loop(client: &reqwest::Client, batch: &CreateBatch, rate: f64) -> Acks {
    let started = Instant::now();
    let total = batch.bodies.len();
    let due = |i: usize| started + Duration::from_secs_f64(i as f64 / rate);
    let mut requests = JoinSet::new();
    let mut next = 0;
    while next < total {
        let now = Instant::now();
        while next < total && due(next) <= now {
            let (client, url, body, scheduled) = (
                client.clone(),
                batch.url.clone(),
                batch.bodies[next].clone(),
                due(next),
            );
            requests.spawn(async move {
                let result = post(&client, &url, body).await;
                (scheduled.elapsed(), result)
            });
            next += 1;
        }
        if next < total {
            tokio::time::sleep_until(due(next).into()).await;
        }
    }
    let mut all = Acks::empty();
    while let Some(joined) = requests.join_next().await {
        match joined {
            Ok((latency, result)) => all.record(latency, result),
            Err(e) => all.errors.push(format!("client task failed: {e}")),
        }
    }
    all.elapsed = started.elapsed();
    all
}

async fn post(client: &reqwest::Client, url: &str, body: String) -> Result<(), String> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("POST failed: {e}"))?;
    let status = response.status();
    if status.as_u16() == 202 {
        // Read the body so the connection returns to the pool.
        let _ = response.bytes().await;
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    Err(format!("{status}: {text}"))
}

impl Acks {
    fn empty() -> Acks {
        Acks {
            latencies: Vec::new(),
            elapsed: Duration::ZERO,
            accepted: 0,
            errors: Vec::new(),
        }
    }

    fn record(&mut self, latency: Duration, result: Result<(), String>) {
        self.latencies.push(latency);
        match result {
            Ok(()) => self.accepted += 1,
            Err(e) => self.errors.push(e),
        }
    }

    fn merge(&mut self, other: Acks) {
        self.latencies.extend(other.latencies);
        self.accepted += other.accepted;
        self.errors.extend(other.errors);
    }

    /// Latency percentiles of the answered creates.
    pub(crate) fn stats(&self) -> LatencyStats {
        LatencyStats::from_samples(self.latencies.clone())
    }
}

/// Intents of `submitters` in one of `states`.
pub(crate) async fn count_in_states(
    db: &BenchDb,
    submitters: &[String],
    states: &[&str],
) -> anyhow::Result<usize> {
    db.count_own_query();
    let count: i64 = sqlx::query_scalar(
        // `chain_id < HISTORY_CHAINS`: an index range over the bench's own
        // chain, never a scan of a loaded history (phase "history").
        "SELECT count(*) FROM managed_tx
          WHERE chain_id < 900000 AND state = ANY($1) AND submitter = ANY($2)",
    )
    .bind(states)
    .bind(submitters)
    .fetch_one(&db.pool)
    .await
    .context("counting intents by state")?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// Intents of `submitters` in state TRACKING.
pub(crate) async fn tracking_count(db: &BenchDb, submitters: &[String]) -> anyhow::Result<usize> {
    count_in_states(db, submitters, &["TRACKING"]).await
}

/// Polls every 20 ms until `target` intents of `submitters` are TRACKING;
/// returns when that was first seen, or fails at `deadline` with the
/// state breakdown.
pub(crate) async fn wait_tracking(
    db: &BenchDb,
    submitters: &[String],
    target: usize,
    deadline: Instant,
) -> anyhow::Result<Instant> {
    wait_states(
        db,
        submitters,
        &["TRACKING"],
        target,
        deadline,
        TRACKING_POLL,
    )
    .await
}

/// Polls every `poll` until `target` intents of `submitters` are in one of
/// `states`; returns when that was first seen, or fails at `deadline` with
/// the state breakdown.
pub(crate) async fn wait_states(
    db: &BenchDb,
    submitters: &[String],
    states: &[&str],
    target: usize,
    deadline: Instant,
    poll: Duration,
) -> anyhow::Result<Instant> {
    loop {
        if count_in_states(db, submitters, states).await? >= target {
            return Ok(Instant::now());
        }
        if Instant::now() >= deadline {
            bail!(
                "only part of {target} intents reached {states:?} in time; states now: {:?}",
                state_breakdown(db, submitters).await
            );
        }
        tokio::time::sleep(poll).await;
    }
}

/// Polls every [`TRACKING_POLL`] until no intent of `submitters` is QUEUED
/// or ALLOCATED (a scan of the few pending rows, whatever the table holds);
/// returns when that was first seen, or fails at `deadline`.
pub(crate) async fn wait_none_pending(
    db: &BenchDb,
    submitters: &[String],
    deadline: Instant,
) -> anyhow::Result<Instant> {
    loop {
        if count_in_states(db, submitters, &["QUEUED", "ALLOCATED"]).await? == 0 {
            return Ok(Instant::now());
        }
        if Instant::now() >= deadline {
            bail!(
                "intents still pending at the deadline; states now: {:?}",
                state_breakdown(db, submitters).await
            );
        }
        tokio::time::sleep(TRACKING_POLL).await;
    }
}

/// `(state, count)` of the intents of `submitters`, for error messages.
pub(crate) async fn state_breakdown(db: &BenchDb, submitters: &[String]) -> Vec<(String, i64)> {
    db.count_own_query();
    sqlx::query_as(
        "SELECT state, count(*) FROM managed_tx WHERE chain_id < 900000 AND submitter = ANY($1)
          GROUP BY state ORDER BY state",
    )
    .bind(submitters)
    .fetch_all(&db.pool)
    .await
    .unwrap_or_default()
}
