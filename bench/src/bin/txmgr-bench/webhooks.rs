//! Phase "webhooks": push delivery measured on its own — the engine's
//! webhook actor reading the completion feed of the bench database and
//! POSTing each event, signed, to a receiver in this process.
//!
//! Feed rows are written straight into `tx_completion` (funds events: they
//! need no transaction behind them), so the figures are those of delivery
//! alone: feed read → HTTP → fenced cursor commit. Two measurements:
//! - burst: `--webhook-events` rows over `--webhook-submitters` submitters
//!   committed at once; events per second until the receiver has all;
//! - open loop: one row per commit at `--webhook-rate` per second for 5 s;
//!   latency from the row's commit (`completed_at`, database clock) to its
//!   arrival at the receiver (same machine, same clock).

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use axum::{body::Bytes, extract::State, routing::post, Router};
use serde::Serialize;
use sqlx::postgres::PgPoolOptions;
use txmgr_actors::{
    cluster::{BalanceConfig, Membership},
    domain::FeedEvent,
    store::{self, LeaseOwner},
    submitter::LeaseTiming,
    webhook::{WebhookEnv, WebhookSecret, WebhookSettings, Webhooks},
};

use crate::{cpu::CpuSample, node::BenchDb, report::LatencyStats};

/// How long the open-loop part offers events.
const OPEN_LOOP: Duration = Duration::from_secs(5);
/// Bound on either part.
const PART_TIMEOUT: Duration = Duration::from_secs(300);

/// What the phase measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WebhookPhase {
    /// Events of the burst.
    pub(crate) events: usize,
    /// Submitters they are spread over (each delivered in order).
    pub(crate) submitters: usize,
    /// The webhook's `concurrency`.
    pub(crate) concurrency: usize,
    /// Burst events delivered per second.
    pub(crate) events_per_s: f64,
    /// This process's CPU (webhook actor + receiver) per burst event, ms.
    pub(crate) bench_cpu_ms_per_event: f64,
    /// PostgreSQL CPU per burst event, ms.
    pub(crate) pg_cpu_ms_per_event: f64,
    /// Open-loop offered rate.
    pub(crate) rate_per_s: f64,
    /// Commit → arrival at the receiver, open loop.
    pub(crate) latency: LatencyStats,
}

impl WebhookPhase {
    /// Prints the phase.
    pub(crate) fn print(&self) {
        println!(
            "\nwebhooks (feed → signed POST → fenced cursor; receiver in this process)\n  \
             burst: {} events over {} submitters (concurrency {}): {:.0} events/s, CPU ms per event \
             bench {:.3} / pg {:.3}\n  open loop {:.0} events/s: commit → receiver p50 {:.1} ms, \
             p99 {:.1} ms, max {:.1} ms ({} events)",
            self.events,
            self.submitters,
            self.concurrency,
            self.events_per_s,
            self.bench_cpu_ms_per_event,
            self.pg_cpu_ms_per_event,
            self.rate_per_s,
            self.latency.p50_ms,
            self.latency.p99_ms,
            self.latency.max_ms,
            self.latency.count
        );
    }
}

/// What the receiver saw.
#[derive(Default)]
struct Received {
    count: AtomicUsize,
    /// Commit → arrival of each event received while `measuring`.
    latencies: Mutex<Vec<Duration>>,
    measuring: std::sync::atomic::AtomicBool,
}

async fn receive(State(seen): State<Arc<Received>>, body: Bytes) -> &'static str {
    seen.count.fetch_add(1, Ordering::Relaxed);
    if seen.measuring.load(Ordering::Relaxed) {
        let completed = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["completed_at"].as_str().map(str::to_owned))
            .and_then(|t| sqlx::types::chrono::DateTime::parse_from_rfc3339(&t).ok());
        if let Some(completed) = completed {
            let age = sqlx::types::chrono::Utc::now().signed_duration_since(completed);
            if let (Ok(age), Ok(mut latencies)) = (age.to_std(), seen.latencies.lock()) {
                latencies.push(age);
            }
        }
    }
    "ok"
}

/// Inserts `n` funds rows spread over `submitters` addresses, in one commit
/// with the feed's `NOTIFY`, as the engine's own completions do.
async fn insert_events(db: &BenchDb, n: usize, submitters: usize) -> anyhow::Result<()> {
    sqlx::query(
        "WITH rows AS (
            INSERT INTO tx_completion (chain_id, submitter, state, balance_wei, min_balance_wei)
            SELECT 31337, '0x' || lpad(to_hex(1 + i % $2), 40, '0'), $3, 1, 2
              FROM generate_series(0, $1 - 1) AS i
            RETURNING 1)
         SELECT pg_notify($4, '31337') FROM (SELECT count(*) FROM rows) AS c",
    )
    .bind(i64::try_from(n)?)
    .bind(i64::try_from(submitters.max(1))?)
    .bind(FeedEvent::LowBalance.as_str())
    .bind(store::completions::COMPLETION_CHANNEL)
    .execute(&db.pool)
    .await
    .context("inserting feed rows")?;
    Ok(())
}

/// Wakes the webhooks at each feed `NOTIFY`, as the daemon's listener does.
async fn wake_on_notify(
    db: &BenchDb,
    webhooks: Webhooks,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut listener = sqlx::postgres::PgListener::connect(&db.url).await?;
    listener
        .listen(store::completions::COMPLETION_CHANNEL)
        .await?;
    Ok(tokio::spawn(async move {
        while listener.recv().await.is_ok() {
            webhooks.wake();
        }
    }))
}

async fn wait_for(seen: &Received, n: usize, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + PART_TIMEOUT;
    while seen.count.load(Ordering::Relaxed) < n {
        if Instant::now() > deadline {
            anyhow::bail!(
                "webhooks {what}: {} of {n} events delivered within {PART_TIMEOUT:?}",
                seen.count.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Runs the phase on the bench database.
pub(crate) async fn run(
    db: &BenchDb,
    events: usize,
    submitters: usize,
    concurrency: usize,
    rate_per_s: f64,
) -> anyhow::Result<WebhookPhase> {
    store::migrate(&db.pool).await.context("migrations")?;
    let seen = Arc::new(Received::default());
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(&db.url)
        .await
        .context("webhook pool")?;
    let env = WebhookEnv {
        pool,
        chain_id: 31337u64.into(),
        owner: LeaseOwner::for_this_process("bench"),
        lease: LeaseTiming {
            duration: Duration::from_secs(10),
            renew_interval: Duration::from_secs(3),
            clock_skew: Duration::from_secs(1),
            idle_release_after: Duration::from_secs(60),
        },
        membership: Arc::new(Membership::new(BalanceConfig::default())),
        tick: Duration::from_millis(250),
    };
    let settings = WebhookSettings {
        name: "bench".into(),
        url,
        secret: WebhookSecret::new("bench-secret"),
        events: FeedEvent::ALL.into_iter().collect(),
        submitters: None,
        chains: None,
        max_attempts: 10,
        backoff_initial: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        timeout: Duration::from_secs(10),
        concurrency,
        ca_file: None,
        start_at_end: true,
    };
    let webhooks = Webhooks::start(env, vec![settings]).await?;
    let wakes = wake_on_notify(db, webhooks.clone()).await?;

    let before = CpuSample::take(&[], Some(db)).await;
    let started = Instant::now();
    insert_events(db, events, submitters).await?;
    wait_for(&seen, events, "burst").await?;
    let elapsed = started.elapsed();
    let cpu = CpuSample::take(&[], Some(db)).await.since(&before, events);

    seen.measuring.store(true, Ordering::Relaxed);
    let interval = Duration::from_secs_f64(1.0 / rate_per_s.max(1.0));
    let mut tick = tokio::time::interval(interval);
    let offered_until = Instant::now() + OPEN_LOOP;
    let mut offered = 0usize;
    while Instant::now() < offered_until {
        tick.tick().await;
        insert_events(db, 1, submitters).await?;
        offered += 1;
    }
    wait_for(&seen, events + offered, "open loop").await?;
    webhooks.shutdown(Duration::from_secs(5)).await;
    wakes.abort();
    server.abort();
    let latencies = seen.latencies.lock().map(|l| l.clone()).unwrap_or_default();
    Ok(WebhookPhase {
        events,
        submitters,
        concurrency,
        events_per_s: events as f64 / elapsed.as_secs_f64(),
        bench_cpu_ms_per_event: cpu.bench_ms_per_tx,
        pg_cpu_ms_per_event: cpu.postgres_ms_per_tx,
        rate_per_s,
        latency: LatencyStats::from_samples(latencies),
    })
}
