//! The txmgr phases: warm up each submitter, then measure creates (closed
//! loop, until every intent is TRACKING) or ack latency (open loop).

use std::time::{Duration, Instant};

use alloy::primitives::Address;
use anyhow::{bail, Context};

use crate::{
    anvil::Anvil,
    cpu::CpuSample,
    daemon::Daemon,
    load::{self, Acks, CreateBatch},
    node::{BenchDb, Node},
    raw::{millis, per_second},
    report::{AckPhase, PipelineStats, TxmgrPhase},
    row_versions::TupleCounts,
    Args, TRANSFER_GAS,
};

/// Least time warm-up intents may take to reach TRACKING (lease
/// acquisition, nonce reconciliation); `--tracking-timeout` when longer.
const MIN_WARM_UP_TIMEOUT: Duration = Duration::from_secs(60);

/// Warm-up creates in flight at once, at most: one per submitter, so each
/// submitter's lease acquisition overlaps the others'.
const MAX_WARM_UP_CONCURRENCY: usize = 256;

/// The node under test: in this process, or a `txmgr run` process.
pub(crate) enum Target<'a> {
    /// The engine and router in this process, with its counting chain.
    InProcess(&'a Node),
    /// A real daemon: driven over loopback HTTP, its CPU read from
    /// `/proc/<pid>`, its chain-port calls from its `/metrics`.
    Process(&'a Daemon),
}

impl Target<'_> {
    fn base_url(&self) -> &str {
        match self {
            Target::InProcess(node) => &node.base_url,
            Target::Process(daemon) => &daemon.base_url,
        }
    }

    /// `Authorization` of every create, when the node wants a token.
    fn authorization(&self) -> anyhow::Result<reqwest::header::HeaderMap> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Target::Process(daemon) = self {
            if let Some(token) = daemon.client_token() {
                let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                    .context("bearer token header")?;
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
        }
        Ok(headers)
    }

    fn daemon_pid(&self) -> Option<u32> {
        match self {
            Target::InProcess(_) => None,
            Target::Process(daemon) => daemon.pid(),
        }
    }
}

/// Chain-port calls so far, for a phase's difference.
enum ChainCount {
    InProcess(crate::chain_stats::ChainSnapshot),
    Process(f64),
}

/// What every txmgr phase shares.
pub(crate) struct TxmgrBench<'a> {
    /// Keep-alive HTTP client pool.
    pub(crate) client: reqwest::Client,
    /// The node under test.
    pub(crate) target: Target<'a>,
    /// The bench database (its own pool).
    pub(crate) db: &'a BenchDb,
    /// Client requests in flight at once (closed loop).
    pub(crate) concurrency: usize,
    /// `gas_limit` of each intent; `None` lets the engine estimate.
    pub(crate) gas_limit: Option<u64>,
    /// Bound on reaching TRACKING after the first POST.
    pub(crate) tracking_timeout: Duration,
    /// The anvils' process ids, for CPU accounting.
    pub(crate) anvil_pids: Vec<u32>,
    /// The chains creates go to, round-robin; empty: the node's one chain
    /// (no `chain_id` in the body).
    pub(crate) chain_ids: Vec<u64>,
}

impl<'a> TxmgrBench<'a> {
    /// The phases' shared state for `node`, with a keep-alive client pool
    /// sized for `--concurrency`; creates name `chain_ids` round-robin
    /// (empty: the node's one chain).
    pub(crate) fn new(
        args: &Args,
        target: Target<'a>,
        db: &'a BenchDb,
        anvils: &[&Anvil],
        chain_ids: Vec<u64>,
    ) -> anyhow::Result<TxmgrBench<'a>> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(args.concurrency.max(256))
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .default_headers(target.authorization()?)
            .build()
            .context("HTTP client")?;
        Ok(TxmgrBench {
            client,
            target,
            db,
            concurrency: args.concurrency,
            gas_limit: (!args.estimate_gas).then_some(TRANSFER_GAS),
            tracking_timeout: args.tracking_timeout,
            anvil_pids: anvils.iter().filter_map(|a| a.pid()).collect(),
            chain_ids,
        })
    }

    /// One create per submitter (on each chain), waited on until TRACKING,
    /// so the measured phase does not include lease acquisition and nonce
    /// reconciliation.
    /// The creates go out concurrently (up to one per submitter), so 1,000
    /// submitters warm up in about the time of a few lease acquisitions.
    async fn warm_up(&self, submitters: &[Address], tag: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let hex = lower_hex(submitters);
        let before = load::tracking_count(self.db, &hex).await?;
        let pairs = submitters.len() * self.chain_ids.len().max(1);
        let batch = CreateBatch::new(
            self.target.base_url(),
            submitters,
            &self.chain_ids,
            pairs,
            &format!("{tag}-w"),
            self.gas_limit,
        );
        let concurrency = self.concurrency.max(pairs.min(MAX_WARM_UP_CONCURRENCY));
        let acks = load::closed_loop(&self.client, &batch, concurrency).await;
        fail_on_errors(&acks, "warm-up")?;
        let deadline = started + self.tracking_timeout.max(MIN_WARM_UP_TIMEOUT);
        load::wait_tracking(self.db, &hex, before + pairs, deadline)
            .await
            .context("warm-up")?;
        Ok(started.elapsed())
    }

    /// Creates `count` intents over `submitters` at the configured
    /// concurrency and times acks and the way to TRACKING.
    pub(crate) async fn closed_loop(
        &self,
        submitters: &[Address],
        count: usize,
        tag: &str,
    ) -> anyhow::Result<TxmgrPhase> {
        let warm_up = self.warm_up(submitters, tag).await?;
        let hex = lower_hex(submitters);
        let baseline = load::tracking_count(self.db, &hex).await?;
        let batch = CreateBatch::new(
            self.target.base_url(),
            submitters,
            &self.chain_ids,
            count,
            &format!("{tag}-n"),
            self.gas_limit,
        );
        // The warm-up's writes published first, so none count in the phase.
        tokio::time::sleep(crate::row_versions::STATS_SETTLE).await;
        let tuples_before = TupleCounts::take(self.db).await?;
        let chain_before = self.chain_count().await?;
        let cpu_before =
            CpuSample::take_with_daemon(&self.anvil_pids, Some(self.db), self.target.daemon_pid())
                .await;
        let db_before = self.db.transactions().await?;
        let wal_before = crate::row_versions::wal_position(self.db).await?;
        let lsn_before = crate::wal_relations::position(self.db).await?;

        let started = Instant::now();
        let client = self.client.clone();
        let concurrency = self.concurrency;
        let creates =
            tokio::spawn(async move { load::closed_loop(&client, &batch, concurrency).await });
        // Nothing is polled while the creates run (a count over every
        // TRACKING row each 20 ms cost PostgreSQL more than the engine);
        // once all are acknowledged, every row exists and the phase ends
        // when none is QUEUED or ALLOCATED any more — a scan of the few
        // rows still pending. The last intent may be TRACKING before its 202
        // reaches the client, so this may read up to one poll late.
        let acks = creates.await.context("create driver panicked")?;
        fail_on_errors(&acks, tag)?;
        let tracked_at =
            load::wait_none_pending(self.db, &hex, started + self.tracking_timeout).await?;
        let tracked = load::tracking_count(self.db, &hex).await?;
        if tracked < baseline + count {
            bail!(
                "{tag}: only {} of {count} intents reached TRACKING",
                tracked - baseline
            );
        }
        let e2e = tracked_at.duration_since(started);
        let wal_bytes = crate::row_versions::wal_position(self.db).await? - wal_before;
        let lsn_after = crate::wal_relations::position(self.db).await?;
        let cpu =
            CpuSample::take_with_daemon(&self.anvil_pids, Some(self.db), self.target.daemon_pid())
                .await
                .since(&cpu_before, count);
        let (chain_calls, chain_calls_per_intent, rpc_requests_per_intent) =
            match (chain_before, self.chain_count().await?) {
                (ChainCount::InProcess(before), ChainCount::InProcess(after)) => {
                    let calls = after.since(&before, count);
                    let per_intent = calls.iter().map(|c| c.per_intent).sum();
                    let rpc = calls.iter().map(|c| c.rpc_per_intent).sum();
                    (calls, per_intent, rpc)
                }
                // A process's metrics count JSON-RPC requests per endpoint
                // (a batch is one) and each call within a batch, not the
                // chain-port calls the in-process counter sees.
                (ChainCount::Process(before), ChainCount::Process(after)) => {
                    (Vec::new(), f64::NAN, (after - before) / count.max(1) as f64)
                }
                _ => bail!("{tag}: the node under test changed"),
            };
        // Last, after every other reading: the statistics of the phase's
        // writes are all published only after a wait (mining is off, so
        // nothing but housekeeping writes meanwhile).
        tokio::time::sleep(crate::row_versions::STATS_SETTLE).await;
        let row_versions = TupleCounts::take(self.db)
            .await?
            .since(&tuples_before, count);
        let db_transactions = self.db.transactions().await? - db_before;
        let intents = count.max(1) as f64;
        // After every measured figure: reading the WAL back costs time.
        let wal_by_relation =
            crate::wal_relations::by_relation(self.db, &lsn_before, &lsn_after, count).await;

        Ok(TxmgrPhase {
            submitters: submitters.len(),
            warm_up_ms: millis(warm_up),
            count,
            concurrency: self.concurrency,
            ack_elapsed_ms: millis(acks.elapsed),
            acks_per_s: per_second(acks.accepted, acks.elapsed),
            ack_latency: acks.stats(),
            e2e_ms: millis(e2e),
            e2e_tx_per_s: per_second(count, e2e),
            ratio_vs_raw: None,
            chain_calls_per_intent,
            rpc_requests_per_intent,
            chain_calls,
            db_transactions,
            db_transactions_per_intent: db_transactions as f64 / intents,
            row_versions,
            wal_bytes_per_intent: wal_bytes / intents,
            wal_by_relation,
            cpu,
            pipeline: self.pipeline_stats(&hex, &format!("{tag}-n-%")).await?,
        })
    }

    /// The node's chain-port calls so far (a process: its JSON-RPC requests).
    async fn chain_count(&self) -> anyhow::Result<ChainCount> {
        Ok(match &self.target {
            Target::InProcess(node) => ChainCount::InProcess(node.chain_stats.snapshot()),
            Target::Process(daemon) => {
                ChainCount::Process(daemon.rpc_requests(&self.client).await?)
            }
        })
    }

    /// Open-loop creates at `rate` per second for `duration`.
    pub(crate) async fn open_loop(
        &self,
        submitters: &[Address],
        rate: f64,
        duration: Duration,
    ) -> anyhow::Result<AckPhase> {
        self.warm_up(submitters, "ack").await?;
        let total = (rate * duration.as_secs_f64()).round().max(1.0) as usize;
        let batch = CreateBatch::new(
            self.target.base_url(),
            submitters,
            &self.chain_ids,
            total,
            "ack-o",
            self.gas_limit,
        );
        let started = Instant::now();
        let acks = load::open_loop(&self.client, &batch, rate).await;
        fail_on_errors(&acks, "ack-rate")?;
        // Every create is in; the phase's intents reach TRACKING, and each
        // one's way there is read from its row.
        let hex = lower_hex(submitters);
        load::wait_none_pending(self.db, &hex, started + self.tracking_timeout).await?;
        let pipeline = self.pipeline_stats(&hex, "ack-o-%").await?;
        Ok(AckPhase {
            rate_per_s: rate,
            duration_s: duration.as_secs_f64(),
            submitters: submitters.len(),
            accepted: acks.accepted,
            ack_latency: acks.stats(),
            to_tracking_p50_ms: pipeline.queue_to_tracking_p50_ms,
            to_tracking_p99_ms: pipeline.queue_to_tracking_p99_ms,
        })
    }

    /// Batching as the engine recorded it: rows of one commit share the
    /// commit transaction's `now()`.
    async fn pipeline_stats(
        &self,
        submitters: &[String],
        request_ids: &str,
    ) -> anyhow::Result<PipelineStats> {
        self.db.count_own_query();
        self.db.count_own_query();
        let (ingress, broadcast, p50, p99): (i64, i64, Option<f64>, Option<f64>) = sqlx::query_as(
            "SELECT count(DISTINCT created_at),
                        count(DISTINCT (submitter, last_submit_at)),
                        percentile_cont(0.5) WITHIN GROUP
                          (ORDER BY extract(epoch FROM last_submit_at - created_at)::float8),
                        percentile_cont(0.99) WITHIN GROUP
                          (ORDER BY extract(epoch FROM last_submit_at - created_at)::float8)
                   FROM managed_tx
                  WHERE chain_id < 900000 AND submitter = ANY($1) AND request_id LIKE $2",
        )
        .bind(submitters)
        .bind(request_ids)
        .fetch_one(&self.db.pool)
        .await
        .context("reading pipeline statistics")?;
        let rows: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM managed_tx
              WHERE chain_id < 900000 AND submitter = ANY($1) AND request_id LIKE $2",
        )
        .bind(submitters)
        .bind(request_ids)
        .fetch_one(&self.db.pool)
        .await
        .context("counting phase rows")?;
        Ok(PipelineStats {
            ingress_commits: ingress,
            broadcast_commits: broadcast,
            mean_batch: rows as f64 / broadcast.max(1) as f64,
            queue_to_tracking_p50_ms: p50.unwrap_or(0.0) * 1000.0,
            queue_to_tracking_p99_ms: p99.unwrap_or(0.0) * 1000.0,
        })
    }
}

/// Submitter addresses as the database stores them.
fn lower_hex(addresses: &[Address]) -> Vec<String> {
    addresses.iter().map(|a| format!("{a:#x}")).collect()
}

fn fail_on_errors(acks: &Acks, what: &str) -> anyhow::Result<()> {
    if let Some(first) = acks.errors.first() {
        bail!(
            "{what}: {} of {} creates failed; first: {first}",
            acks.errors.len(),
            acks.latencies.len()
        );
    }
    Ok(())
}
