//! The node's recent history for the ops page's charts (README
//! "Operations"): a ring of samples, one every [`SAMPLE_EVERY`], for the
//! last hour, node-local (each node keeps its own; nothing is stored).
//! Creates and their acknowledgement latency are this node's; completions,
//! queued and in-flight intents are the cluster's, read from PostgreSQL
//! for the chains this node serves; RPC errors are this node's calls.
//! Per submitter, the [`MAX_SUBMITTERS`] most recently active keep a ring
//! too. The routes that serve it are in `ops_history.rs`.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde::Serialize;
use sqlx::PgPool;
use txmgr_actors::{domain::ChainId, store::open_work};

use super::served_chains::ServedChains;

/// One sample per this period.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Samples kept: one hour.
const SAMPLES: usize = 360;
/// Submitters with a history of their own.
pub const MAX_SUBMITTERS: usize = 50;
/// Acknowledgement latencies kept between two samples (the rest are
/// counted, not timed).
const MAX_LATENCIES: usize = 20_000;

/// The node's numbers over one sample period.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct NodeSample {
    /// End of the period, Unix seconds.
    pub at: i64,
    /// Creates this node accepted (202) in the period.
    pub creates: u64,
    /// Transactions CONFIRMED in the period (the cluster's, served chains).
    pub confirmations: u64,
    /// Median create acknowledgement of this node, milliseconds.
    pub ack_p50_ms: Option<f64>,
    /// 99th percentile create acknowledgement, milliseconds.
    pub ack_p99_ms: Option<f64>,
    /// Intents holding a nonce at the end of the period (ALLOCATED,
    /// TRACKING, STUCK).
    pub in_flight: i64,
    /// QUEUED intents at the end of the period.
    pub queued: i64,
    /// This node's RPC calls that failed in the period.
    pub rpc_errors: u64,
}

/// One submitter's numbers over one sample period.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct SubmitterSample {
    /// End of the period, Unix seconds.
    pub at: i64,
    /// Its creates this node accepted.
    pub creates: u64,
    /// Its transactions CONFIRMED.
    pub confirmations: u64,
    /// Its intents holding a nonce at the end of the period.
    pub in_flight: i64,
    /// Its QUEUED intents at the end of the period.
    pub queued: i64,
}

/// Body of `GET /v1/ops/history`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HistoryView {
    /// Seconds between samples.
    pub interval_seconds: u64,
    /// Oldest first, up to an hour.
    pub samples: Vec<NodeSample>,
    /// Submitters with a history (`GET /v1/ops/history/submitters/{address}`),
    /// most recently active first.
    pub submitters: Vec<String>,
}

/// Body of `GET /v1/ops/history/submitters/{address}`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SubmitterHistoryView {
    /// The submitter (lower-case `0x` hex).
    pub submitter: String,
    /// Seconds between samples.
    pub interval_seconds: u64,
    /// Oldest first.
    pub samples: Vec<SubmitterSample>,
}

/// What the create handler counts between two samples.
#[derive(Debug, Default)]
struct Pending {
    creates: u64,
    by_submitter: HashMap<String, u64>,
    latencies_ms: Vec<f64>,
}

#[derive(Debug, Default)]
struct Rings {
    node: VecDeque<NodeSample>,
    submitters: HashMap<String, (i64, VecDeque<SubmitterSample>)>,
}

/// The node's history: what the create handler counts, and the rings.
#[derive(Debug, Default)]
pub struct NodeHistory {
    pending: Mutex<Pending>,
    rings: Mutex<Rings>,
}

impl NodeHistory {
    /// Counts an accepted create of `submitter` (lower-case hex) answered
    /// after `latency`.
    pub fn record_create(&self, submitter: &str, latency: Duration) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.creates += 1;
        // The key is copied only the first time a sample period sees it.
        match pending.by_submitter.get_mut(submitter) {
            Some(count) => *count += 1,
            None => {
                pending.by_submitter.insert(submitter.to_owned(), 1);
            }
        }
        if pending.latencies_ms.len() < MAX_LATENCIES {
            pending.latencies_ms.push(latency.as_secs_f64() * 1000.0);
        }
    }

    fn take_pending(&self) -> Pending {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push(&self, sample: NodeSample, submitters: HashMap<String, SubmitterSample>) {
        let mut rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        let at = sample.at;
        rings.node.push_back(sample);
        while rings.node.len() > SAMPLES {
            rings.node.pop_front();
        }
        // The active ones are (re)marked; every tracked one gets a sample,
        // idle or not, so its series stay aligned with the node's.
        let tracked: Vec<String> = rings.submitters.keys().cloned().collect();
        for (address, sample) in &submitters {
            let entry = rings
                .submitters
                .entry(address.clone())
                .or_insert_with(|| (at, VecDeque::new()));
            entry.0 = at;
            entry.1.push_back(sample.clone());
        }
        for address in tracked.iter().filter(|a| !submitters.contains_key(*a)) {
            if let Some((_, ring)) = rings.submitters.get_mut(address) {
                ring.push_back(SubmitterSample {
                    at,
                    ..SubmitterSample::default()
                });
            }
        }
        for (_, ring) in rings.submitters.values_mut() {
            while ring.len() > SAMPLES {
                ring.pop_front();
            }
        }
        while rings.submitters.len() > MAX_SUBMITTERS {
            let Some(oldest) = rings
                .submitters
                .iter()
                .min_by_key(|(_, (last, _))| *last)
                .map(|(a, _)| a.clone())
            else {
                break;
            };
            rings.submitters.remove(&oldest);
        }
    }

    /// The node's samples and the submitters with a history.
    pub fn view(&self) -> HistoryView {
        let rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        let mut submitters: Vec<(&String, i64)> = rings
            .submitters
            .iter()
            .map(|(a, (last, _))| (a, *last))
            .collect();
        submitters.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        HistoryView {
            interval_seconds: SAMPLE_EVERY.as_secs(),
            samples: rings.node.iter().cloned().collect(),
            submitters: submitters.into_iter().map(|(a, _)| a.clone()).collect(),
        }
    }

    /// The samples of `address` (lower-case hex), if it has a ring.
    pub(super) fn submitter(&self, address: &str) -> Option<Vec<SubmitterSample>> {
        let rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        rings
            .submitters
            .get(address)
            .map(|(_, ring)| ring.iter().cloned().collect())
    }
}

/// The `q`-quantile of `values` (sorted here), nearest rank.
fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

impl NodeHistory {
    /// A history sampled every [`SAMPLE_EVERY`] for the chains `chains`
    /// serves, until the last handle is dropped. `rpc_errors` reads the
    /// node's failed RPC calls so far.
    pub fn start(pool: PgPool, chains: ServedChains, rpc_errors: fn() -> u64) -> Arc<Self> {
        let history = Arc::new(NodeHistory::default());
        tokio::spawn(sample_loop(
            pool,
            chains,
            Arc::downgrade(&history),
            rpc_errors,
        ));
        history
    }
}

async fn sample_loop(
    pool: PgPool,
    chains: ServedChains,
    history: std::sync::Weak<NodeHistory>,
    rpc_errors: fn() -> u64,
) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut since: Option<chrono::DateTime<chrono::Utc>> = None;
    let mut errors_before = rpc_errors();
    loop {
        tick.tick().await;
        let Some(history) = history.upgrade() else {
            return;
        };
        let ids = chains.ids();
        match sample(&pool, &ids, since, &history).await {
            Ok(now) => since = Some(now),
            Err(err) => tracing::debug!(target: "http", error = %err, "history sample not taken"),
        }
        // Errors are this node's, whatever the database said.
        let errors = rpc_errors();
        let mut rings = history.rings.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = rings.node.back_mut() {
            last.rpc_errors = errors.saturating_sub(errors_before);
        }
        errors_before = errors;
    }
}

/// One sample: drains the create counts, reads completions since `since`
/// and the open work; returns the database's now (the next period's start).
async fn sample(
    pool: &PgPool,
    chain_ids: &[ChainId],
    since: Option<chrono::DateTime<chrono::Utc>>,
    history: &NodeHistory,
) -> Result<chrono::DateTime<chrono::Utc>, txmgr_actors::store::StoreError> {
    let (now, confirmed) =
        txmgr_actors::store::completions::confirmed_between(pool, chain_ids, since).await?;
    let mut open: HashMap<String, (i64, i64)> = HashMap::new();
    for chain_id in chain_ids {
        for work in open_work::by_submitter(pool, *chain_id).await? {
            let entry = open.entry(format!("{:#x}", work.submitter)).or_default();
            entry.0 += work.queued;
            entry.1 += work.in_flight;
        }
    }
    let mut pending = history.take_pending();
    let at = now.timestamp();
    let node = NodeSample {
        at,
        creates: pending.creates,
        confirmations: confirmed.values().sum(),
        ack_p50_ms: quantile(&mut pending.latencies_ms, 0.50),
        ack_p99_ms: quantile(&mut pending.latencies_ms, 0.99),
        in_flight: open.values().map(|(_, f)| f).sum(),
        queued: open.values().map(|(q, _)| q).sum(),
        rpc_errors: 0,
    };
    let mut submitters: HashMap<String, SubmitterSample> = HashMap::new();
    let mut touch = |address: &String| {
        submitters
            .entry(address.clone())
            .or_insert_with(|| SubmitterSample {
                at,
                ..SubmitterSample::default()
            })
            .at = at;
    };
    for address in pending
        .by_submitter
        .keys()
        .chain(confirmed.keys())
        .chain(open.keys())
    {
        touch(address);
    }
    for (address, sample) in submitters.iter_mut() {
        sample.creates = pending.by_submitter.get(address).copied().unwrap_or(0);
        sample.confirmations = confirmed.get(address).copied().unwrap_or(0);
        let (queued, in_flight) = open.get(address).copied().unwrap_or_default();
        sample.queued = queued;
        sample.in_flight = in_flight;
    }
    history.push(node, submitters);
    Ok(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut values, 0.5), Some(50.0));
        assert_eq!(quantile(&mut values, 0.99), Some(99.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    #[test]
    fn rings_keep_an_hour_and_the_most_recent_submitters() {
        let history = NodeHistory::default();
        for at in 0..(SAMPLES as i64 + 5) {
            let mut submitters = HashMap::new();
            submitters.insert(
                format!("0x{at:040x}"),
                SubmitterSample {
                    at,
                    creates: 1,
                    ..SubmitterSample::default()
                },
            );
            history.push(
                NodeSample {
                    at,
                    ..NodeSample::default()
                },
                submitters,
            );
        }
        let view = history.view();
        assert_eq!(view.samples.len(), SAMPLES);
        assert_eq!(view.samples[0].at, 5);
        assert_eq!(view.submitters.len(), MAX_SUBMITTERS);
        let newest = format!("0x{:040x}", SAMPLES + 4);
        assert_eq!(view.submitters[0], newest);
        assert_eq!(history.submitter(&newest).map(|s| s.len()), Some(1));
        assert!(history.submitter(&format!("0x{:040x}", 0)).is_none());
    }
}
