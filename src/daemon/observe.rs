//! Metrics plumbing of a node: the process-wide Prometheus recorder, a
//! [`ChainClient`] decorator that counts RPC calls by method, and the task
//! that refreshes the database- and engine-derived gauges.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
    time::Duration,
};

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;
use txmgr_actors::{
    chain::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote, FinalityTag},
    domain::{ChainId, Intent, TxState},
    metrics::{
        CREATE_ACK_SECONDS, DB_POOL_CONNECTIONS, GROUP_COMMIT_SECONDS, MAILBOX_DEPTH,
        OLDEST_PENDING_AGE, RPC_CALLS, RPC_ENDPOINT_LATENCY, SUBMITTER_IN_FLIGHT, SUBMITTER_QUEUED,
        SUBMITTER_ROLES, TRANSACTIONS,
    },
    node::Engine,
    store::{open_work, StoreError},
    webhook::Webhooks,
};

use crate::http::ServedChains;

/// Buckets (seconds) of histograms named `*_seconds`: sub-second to an hour.
const LATENCY_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
];

/// Buckets (seconds) of RPC call latency: a millisecond to the timeout.
const RPC_LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The non-terminal states the transactions gauge counts.
const OPEN_STATES: [TxState; 4] = [
    TxState::Queued,
    TxState::Allocated,
    TxState::Tracking,
    TxState::Stuck,
];

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the global `metrics` recorder, once
/// per process (later calls, e.g. from tests, get the same handle). `None`
/// when another recorder was installed first.
pub fn metrics_recorder() -> Option<PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            // Millisecond-scale timings get the fine buckets.
            let builder = [
                RPC_ENDPOINT_LATENCY,
                CREATE_ACK_SECONDS,
                GROUP_COMMIT_SECONDS,
            ]
            .into_iter()
            .try_fold(PrometheusBuilder::new(), |builder, name| {
                builder.set_buckets_for_metric(Matcher::Full(name.into()), RPC_LATENCY_BUCKETS)
            })
            .ok()?
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
            .ok()?;
            match builder.install_recorder() {
                Ok(handle) => {
                    txmgr_actors::metrics::describe();
                    Some(handle)
                }
                Err(err) => {
                    tracing::warn!(error = %err, "metrics recorder not installed");
                    None
                }
            }
        })
        .clone()
}

/// Chain calls that failed in this process (the ops page's history).
static RPC_ERRORS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Chain calls that failed in this process so far.
pub(super) fn rpc_errors_total() -> u64 {
    RPC_ERRORS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts every chain call in `txmgr_rpc_calls_total{chain, method, result}`.
#[derive(Debug)]
pub struct CountingChain {
    chain: Arc<str>,
    inner: Arc<dyn ChainClient>,
}

impl CountingChain {
    /// Wraps the client of the chain named `chain`.
    pub fn wrap(chain: &str, inner: Arc<dyn ChainClient>) -> Arc<dyn ChainClient> {
        Arc::new(CountingChain {
            chain: chain.into(),
            inner,
        })
    }

    fn counted<T>(
        &self,
        method: &'static str,
        result: Result<T, ChainError>,
    ) -> Result<T, ChainError> {
        let label = if result.is_ok() { "ok" } else { "error" };
        if result.is_err() {
            RPC_ERRORS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        metrics::counter!(RPC_CALLS, "chain" => self.chain.to_string(), "method" => method, "result" => label)
            .increment(1);
        result
    }
}

#[async_trait]
impl ChainClient for CountingChain {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        self.counted("eth_chainId", self.inner.chain_id().await)
    }
    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        self.counted("eth_getTransactionCount", self.inner.nonces(address).await)
    }
    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        self.counted("eth_getBalance", self.inner.balance(address).await)
    }
    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        self.counted(
            "eth_estimateGas",
            self.inner.estimate_gas(from, intent).await,
        )
    }
    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        self.counted("fees", self.inner.fees().await)
    }
    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.counted("eth_sendRawTransaction", self.inner.send_raw(raw).await)
    }
    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        let sent = self.inner.send_raw_private(raw).await;
        self.counted("eth_sendRawTransaction_private", sent)
    }
    fn sends_in_batches(&self) -> bool {
        self.inner.sends_in_batches()
    }
    async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        let answers = self.inner.send_raw_batch(raws).await?;
        Some(
            answers
                .into_iter()
                .map(|sent| self.counted("eth_sendRawTransaction", sent))
                .collect(),
        )
    }
    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.counted("eth_getTransactionReceipt", self.inner.receipt(hash).await)
    }
    async fn block_number(&self) -> Result<u64, ChainError> {
        self.counted("eth_blockNumber", self.inner.block_number().await)
    }
    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        self.counted("eth_getBlockByNumber", self.inner.block(number).await)
    }
    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        self.counted(
            "eth_getBlockReceipts",
            self.inner.block_receipts(hash).await,
        )
    }
    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        self.counted(
            "eth_getBlockByNumber_tag",
            self.inner.tagged_block_number(tag).await,
        )
    }
    fn endpoint_status(&self) -> Vec<txmgr_actors::chain::EndpointStatus> {
        self.inner.endpoint_status()
    }
    fn ws_targets(
        &self,
    ) -> Option<tokio::sync::watch::Receiver<Option<txmgr_actors::chain::WsTarget>>> {
        self.inner.ws_targets()
    }
}

/// Refreshes the gauges every `every`: open transactions by state and the
/// oldest open intent (one grouped query over the non-terminal-state index;
/// terminal states are not counted, their number only grows), mailbox depth
/// and roles (from the handles), and the cluster's nodes live and lost by
/// `liveness`. Also runs the recorder's upkeep.
pub async fn gauge_loop(
    pool: PgPool,
    chains: ServedChains,
    webhooks: Option<Webhooks>,
    recorder: Option<PrometheusHandle>,
    (every, liveness): (Duration, Duration),
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut worked = WorkedSubmitters::default();
    loop {
        tick.tick().await;
        let idle = pool.num_idle();
        let size = pool.size() as usize;
        metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(idle as f64);
        metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use")
            .set(size.saturating_sub(idle) as f64);
        // The chains served now: a reload may add or remove one.
        let served = chains.list();
        for chain in served.iter() {
            if let Err(err) = refresh_states(&pool, &chain.name, chain.chain_id).await {
                tracing::debug!(error = %err, chain = %chain.name, "transactions gauge not refreshed");
            }
            if let Some(engine) = &chain.engine {
                refresh_engine(&chain.name, engine);
                let configured = engine.submitters();
                // A running actor has had work on this node (idle ones stop).
                for handle in engine.handles() {
                    worked.insert((chain.chain_id, handle.key().address));
                }
                if let Err(err) = refresh_submitters(
                    &pool,
                    (&chain.name, chain.chain_id),
                    &configured,
                    &mut worked,
                )
                .await
                {
                    tracing::debug!(error = %err, chain = %chain.name, "submitter gauges not refreshed");
                }
                if let Err(err) = refresh_spend(&pool, &chain.name, chain.chain_id, engine).await {
                    tracing::debug!(error = %err, chain = %chain.name, "spend gauges not refreshed");
                }
            }
        }
        if let Some(webhooks) = &webhooks {
            let configured = webhooks.configured();
            if let Err(err) = refresh_webhooks(&pool, chains.home(), &configured).await {
                tracing::debug!(error = %err, "webhook gauges not refreshed");
            }
        }
        match txmgr_actors::store::node::list(&pool, liveness).await {
            Ok(nodes) => {
                let live = nodes.iter().filter(|n| n.alive).count();
                let gauge = |status: &'static str, count: usize| {
                    metrics::gauge!(txmgr_actors::metrics::CLUSTER_NODES, "status" => status)
                        .set(count as f64);
                };
                gauge("live", live);
                gauge("lost", nodes.len() - live);
            }
            Err(err) => tracing::debug!(error = %err, "cluster node gauges not refreshed"),
        }
        if let Some(recorder) = &recorder {
            recorder.run_upkeep();
        }
    }
}

/// The (chain, submitter) pairs that have had open work, or a running
/// actor, on this node since it started: their queue gauges exist from then
/// on.
type WorkedSubmitters = std::collections::HashSet<(ChainId, Address)>;

/// Queued and in-flight intents of the chain's configured submitters (one
/// grouped query over the open intents). A submitter gets its series once
/// it has open work or an actor here, and keeps them (at 0 when idle
/// again), so a dashboard lists every submitter that worked; one that never
/// did has none. With 10,000 configured, a series pair for each cost 17 MiB
/// of idle RSS and a refresh of them all every tick.
async fn refresh_submitters(
    pool: &PgPool,
    (chain, chain_id): (&str, ChainId),
    configured: &[Address],
    worked: &mut WorkedSubmitters,
) -> Result<(), StoreError> {
    let work: HashMap<Address, (i64, i64)> = open_work::by_submitter(pool, chain_id)
        .await?
        .into_iter()
        .map(|w| (w.submitter, (w.queued, w.in_flight)))
        .collect();
    for address in configured {
        let open = work.get(address).copied();
        if open.is_some() {
            worked.insert((chain_id, *address));
        } else if !worked.contains(&(chain_id, *address)) {
            continue;
        }
        let (queued, in_flight) = open.unwrap_or_default();
        let labels = [
            ("chain", chain.to_owned()),
            ("submitter", format!("{address:#x}")),
        ];
        metrics::gauge!(SUBMITTER_QUEUED, &labels).set(queued as f64);
        metrics::gauge!(SUBMITTER_IN_FLIGHT, &labels).set(in_flight as f64);
    }
    Ok(())
}

async fn refresh_states(pool: &PgPool, chain: &str, chain_id: ChainId) -> Result<(), StoreError> {
    let counts = open_work::by_state(pool, chain_id).await?;
    let mut oldest = Duration::ZERO;
    for state in OPEN_STATES {
        let open = counts.iter().find(|c| c.state == state);
        let count = open.map_or(0, |c| c.count);
        metrics::gauge!(TRANSACTIONS, "chain" => chain.to_string(), "state" => state.as_str())
            .set(count as f64);
        if let Some(open) = open {
            oldest = oldest.max(open.oldest_age);
        }
    }
    metrics::gauge!(OLDEST_PENDING_AGE, "chain" => chain.to_string()).set(oldest.as_secs_f64());
    Ok(())
}

/// Lag and open dead letters of every configured webhook (one query; the
/// lag count is capped, see `store::webhooks::LAG_COUNT_CAP`), over every
/// chain's events whatever this node serves.
async fn refresh_webhooks(
    pool: &PgPool,
    home: ChainId,
    configured: &[String],
) -> Result<(), StoreError> {
    use txmgr_actors::metrics::{
        WEBHOOK_DEAD_LETTERS_OPEN, WEBHOOK_LAG_EVENTS, WEBHOOK_LAG_SECONDS,
    };
    if configured.is_empty() {
        return Ok(());
    }
    let statuses = txmgr_actors::store::webhooks::statuses(pool, home, Some(configured)).await?;
    for status in statuses {
        let webhook = status.name;
        metrics::gauge!(WEBHOOK_LAG_EVENTS, "webhook" => webhook.clone())
            .set(status.lag_events as f64);
        metrics::gauge!(WEBHOOK_LAG_SECONDS, "webhook" => webhook.clone()).set(status.lag_seconds);
        metrics::gauge!(WEBHOOK_DEAD_LETTERS_OPEN, "webhook" => webhook)
            .set(status.dead_letters as f64);
    }
    Ok(())
}

/// Spent, limit and waiting of every submitter with a spend limit (one
/// query per chain; none without limits).
async fn refresh_spend(
    pool: &PgPool,
    chain: &str,
    chain_id: ChainId,
    engine: &Engine,
) -> Result<(), StoreError> {
    use txmgr_actors::metrics::{
        SPEND_FEES_LIMIT, SPEND_FEES_WINDOW, SPEND_LIMIT, SPEND_WAITING, SPEND_WINDOW,
    };
    let limits = engine.spend_limits();
    let windows: Vec<_> = limits.iter().map(|(a, l)| (*a, l.window)).collect();
    let wei = |text: &str| text.parse::<f64>().unwrap_or(0.0);
    for window in txmgr_actors::store::spend::windows(pool, chain_id, &windows).await? {
        let submitter = format!("{:#x}", window.address);
        let Some((_, limit)) = limits.iter().find(|(a, _)| *a == window.address) else {
            continue;
        };
        let labels = [("chain", chain.to_string()), ("submitter", submitter)];
        metrics::gauge!(SPEND_WAITING, &labels).set(window.waiting as f64);
        // Each limit's pair only where that limit is set.
        if let Some(value) = limit.value {
            metrics::gauge!(SPEND_WINDOW, &labels).set(wei(&window.spent_wei));
            metrics::gauge!(SPEND_LIMIT, &labels).set(value as f64);
        }
        if let Some(fees) = limit.fees {
            metrics::gauge!(SPEND_FEES_WINDOW, &labels).set(wei(&window.fees_spent_wei));
            metrics::gauge!(SPEND_FEES_LIMIT, &labels).set(fees as f64);
        }
    }
    Ok(())
}

fn refresh_engine(chain: &str, engine: &Engine) {
    let load = engine.load();
    metrics::gauge!(MAILBOX_DEPTH, "chain" => chain.to_string(), "kind" => "submitter")
        .set(load.mailbox_depth as f64);
    metrics::gauge!(MAILBOX_DEPTH, "chain" => chain.to_string(), "kind" => "ingress")
        .set(load.ingress_depth as f64);
    for role in [
        "idle",
        "leader",
        "standby",
        "protected",
        "stopping",
        "failed",
    ] {
        let count = load.roles.get(role).copied().unwrap_or(0);
        metrics::gauge!(SUBMITTER_ROLES, "chain" => chain.to_string(), "role" => role)
            .set(count as f64);
    }
}

/// Deletes feed rows older than `feed.retain` (see
/// `store::feed_retention`), and spend ledger rows as old, every `every`, a
/// bounded number of batches per round. Every node runs it: the deletes
/// are idempotent.
pub async fn feed_retention_loop(pool: PgPool, retain: Duration, every: Duration) {
    /// Batches per round at most (each looks at 1,000 rows).
    const MAX_BATCHES: u32 = 100;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match txmgr_actors::store::feed_retention::prune(&pool, retain, MAX_BATCHES).await {
            Ok(pruned) if pruned.rows > 0 || pruned.webhooks > 0 => {
                tracing::info!(target: "txmgr::feed", rows = pruned.rows, webhooks = pruned.webhooks,
                    "feed retention: old rows deleted");
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(target: "txmgr::feed", error = %err, "feed retention round failed")
            }
        }
        prune_spend_ledger(&pool, retain, MAX_BATCHES).await;
    }
}

/// Deletes spend ledger rows older than `retain` (every spend window is at
/// most `feed.retain`), at most `max_batches` batches.
async fn prune_spend_ledger(pool: &PgPool, retain: Duration, max_batches: u32) {
    use txmgr_actors::store::spend::{prune_batch, PRUNE_BATCH};
    let mut rows = 0u64;
    for _ in 0..max_batches {
        match prune_batch(pool, retain).await {
            Ok(deleted) => {
                rows += deleted;
                if deleted < PRUNE_BATCH as u64 {
                    break;
                }
            }
            Err(err) => {
                tracing::warn!(target: "txmgr::feed", error = %err, "spend ledger retention batch failed");
                break;
            }
        }
    }
    if rows > 0 {
        tracing::info!(target: "txmgr::feed", rows, "spend ledger retention: old rows deleted");
    }
}
