//! Metrics plumbing of a node: the process-wide Prometheus recorder and the
//! task that refreshes the database- and engine-derived gauges (the chain
//! client that counts RPC calls is `counting_chain`).

use std::{collections::HashMap, sync::OnceLock, time::Duration};

use alloy::primitives::Address;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;
use txmgr_actors::{
    domain::{ChainId, TxState},
    metrics::{
        CREATE_ACK_SECONDS, DB_POOL_CONNECTIONS, GROUP_COMMIT_SECONDS, MAILBOX_DEPTH,
        OLDEST_PENDING_AGE, RPC_ENDPOINT_LATENCY, SUBMITTER_IN_FLIGHT, SUBMITTER_QUEUED,
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
                    metrics::gauge!(txmgr_actors::metrics::BUILD_INFO,
                        "version" => crate::build_info::VERSION, "commit" => crate::build_info::COMMIT)
                    .set(1.0);
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
/// `store::feed_retention`) every `every`, a bounded number of batches per
/// round. Every node runs it: the deletes are idempotent. (The spend ledger
/// has its own retention: `ledger_retention`.)
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
    }
}
