//! What a run measured, printed as a table or as JSON (`--json`).

use std::time::Duration;

use serde::Serialize;

use crate::{chain_stats::MethodCost, cpu::CpuCost};

pub(crate) use crate::idle_report::IdlePhase;

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LatencyStats {
    /// Samples.
    pub(crate) count: usize,
    /// Median.
    pub(crate) p50_ms: f64,
    /// 99th percentile (nearest rank).
    pub(crate) p99_ms: f64,
    /// Slowest sample.
    pub(crate) max_ms: f64,
}

impl LatencyStats {
    /// Nearest-rank percentiles of `samples`.
    pub(crate) fn from_samples(mut samples: Vec<Duration>) -> LatencyStats {
        samples.sort_unstable();
        let rank = |q: f64| -> f64 {
            if samples.is_empty() {
                return 0.0;
            }
            let i = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i].as_secs_f64() * 1000.0
        };
        LatencyStats {
            count: samples.len(),
            p50_ms: rank(0.50),
            p99_ms: rank(0.99),
            max_ms: rank(1.0),
        }
    }
}

/// Phase "raw": pre-signed transfers sent straight to anvil.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RawPhase {
    /// Sending keys.
    pub(crate) keys: usize,
    /// Transfers sent.
    pub(crate) count: usize,
    /// Requests in flight at once.
    pub(crate) concurrency: usize,
    /// First send → last answer.
    pub(crate) elapsed_ms: f64,
    /// `count / elapsed`: the ceiling.
    pub(crate) tx_per_s: f64,
    /// Latency of one `eth_sendRawTransaction`.
    pub(crate) send_latency: LatencyStats,
    /// CPU per transfer (bench = the sender).
    pub(crate) cpu: CpuCost,
}

/// Where the engine's time went in a txmgr phase, from the rows it wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PipelineStats {
    /// Ingress group commits (distinct `(submitter, created_at)`).
    pub(crate) ingress_commits: i64,
    /// Broadcast-record commits (distinct `(submitter, last_submit_at)`):
    /// one per pipeline batch.
    pub(crate) broadcast_commits: i64,
    /// Intents per broadcast commit.
    pub(crate) mean_batch: f64,
    /// Median of insert commit → broadcast recorded, in milliseconds.
    pub(crate) queue_to_tracking_p50_ms: f64,
    /// 99th percentile of the same.
    pub(crate) queue_to_tracking_p99_ms: f64,
}

/// Phases "one" and "many": creates over HTTP until TRACKING.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TxmgrPhase {
    /// Submitters the intents were spread over.
    pub(crate) submitters: usize,
    /// Warm-up (one intent per submitter, untimed) until all TRACKING.
    pub(crate) warm_up_ms: f64,
    /// Intents created.
    pub(crate) count: usize,
    /// Client requests in flight at once.
    pub(crate) concurrency: usize,
    /// First POST → last 202.
    pub(crate) ack_elapsed_ms: f64,
    /// `count / ack_elapsed`.
    pub(crate) acks_per_s: f64,
    /// Create-ack latency (durable: answered after the INSERT commit).
    pub(crate) ack_latency: LatencyStats,
    /// First POST → all `count` intents TRACKING.
    pub(crate) e2e_ms: f64,
    /// `count / e2e`.
    pub(crate) e2e_tx_per_s: f64,
    /// `e2e_tx_per_s / raw tx_per_s` with as many keys; DESIGN target ≥ 0.8.
    pub(crate) ratio_vs_raw: Option<f64>,
    /// Engine chain calls over the phase (warm-up excluded).
    pub(crate) chain_calls: Vec<MethodCost>,
    /// Chain-port calls per intent, all methods.
    pub(crate) chain_calls_per_intent: f64,
    /// JSON-RPC requests per intent, all methods (a `fees` call is three).
    pub(crate) rpc_requests_per_intent: f64,
    /// Transactions of the bench database over the phase
    /// (`pg_stat_database` commits + rollbacks, the bench's own polls
    /// subtracted).
    pub(crate) db_transactions: i64,
    /// `db_transactions / count`.
    pub(crate) db_transactions_per_intent: f64,
    /// Tuples written over the phase (`pg_stat_user_tables`), per intent.
    pub(crate) row_versions: crate::row_versions::RowVersions,
    /// WAL bytes the whole cluster wrote per intent between the first
    /// create and the last TRACKING (repeatable where CPU time on a shared
    /// machine is not: what each write costs PostgreSQL to log).
    pub(crate) wal_bytes_per_intent: f64,
    /// The same WAL by relation, most first (`pg_walinspect`; empty when
    /// it cannot be read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) wal_by_relation: Vec<crate::wal_relations::RelationWal>,
    /// CPU per intent, first POST → all TRACKING (includes the bench's own
    /// client and its 20 ms polling).
    pub(crate) cpu: CpuCost,
    /// Batching as recorded in the database.
    pub(crate) pipeline: PipelineStats,
}

/// `--ack-rate`: open-loop creates.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AckPhase {
    /// Offered rate.
    pub(crate) rate_per_s: f64,
    /// Seconds offered.
    pub(crate) duration_s: f64,
    /// Submitters the creates were spread over.
    pub(crate) submitters: usize,
    /// Creates answered 202.
    pub(crate) accepted: usize,
    /// Latency from each create's scheduled time to its answer.
    pub(crate) ack_latency: LatencyStats,
    /// Insert commit → TRACKING (the broadcast recorded) of the open-loop
    /// intents, p50, from the rows' `created_at` and `last_submit_at`.
    pub(crate) to_tracking_p50_ms: f64,
    /// The same, p99.
    pub(crate) to_tracking_p99_ms: f64,
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// CPUs available to the process (client, node, anvil and PostgreSQL
    /// all share them).
    pub(crate) cpus: usize,
    /// Intents (transfers) per closed-loop phase.
    pub(crate) count: usize,
    /// Client concurrency.
    pub(crate) concurrency: usize,
    /// Engine `batch_size`.
    pub(crate) batch_size: u32,
    /// Whether intents carried `gas_limit` (false = engine estimates).
    pub(crate) fixed_gas_limit: bool,
    /// `--unsafe-async-commit`: commits did not wait for the WAL flush.
    pub(crate) async_commit: bool,
    /// Raw send with one key.
    pub(crate) raw_one: Option<RawPhase>,
    /// Raw send with as many keys as submitters, one per `--submitters`.
    pub(crate) raw_many: Vec<RawPhase>,
    /// txmgr, one submitter.
    pub(crate) one: Option<TxmgrPhase>,
    /// txmgr, many submitters, one per `--submitters`.
    pub(crate) many: Vec<TxmgrPhase>,
    /// Open-loop ack latency.
    pub(crate) ack: Option<AckPhase>,
    /// `--rpc-tls`: txmgr, one submitter, JSON-RPC over HTTPS.
    pub(crate) one_tls: Option<TxmgrPhase>,
    /// `--rpc-tls`: txmgr, many submitters, JSON-RPC over HTTPS.
    pub(crate) many_tls: Vec<TxmgrPhase>,
    /// `--spend-limit`: txmgr, one submitter, under a spend limit.
    pub(crate) one_spend: Option<TxmgrPhase>,
    /// `--spend-limit`: txmgr, many submitters, under a spend limit.
    pub(crate) many_spend: Vec<TxmgrPhase>,
    /// `--one-pkcs11`: txmgr, one submitter whose key is on SoftHSM2.
    pub(crate) one_pkcs11: Option<TxmgrPhase>,
    /// `--daemon`: a `txmgr run` process under test, one pass per
    /// `--daemon-variants` entry.
    pub(crate) daemon: Vec<crate::daemon_pass::DaemonPass>,
    /// Phase "idle": a real daemon with `--idle-submitters` submitters.
    pub(crate) idle: Option<IdlePhase>,
    /// Phase "webhooks": delivery alone.
    pub(crate) webhooks: Option<crate::webhooks::WebhookPhase>,
    /// Phase "signers": signing per key by kind.
    pub(crate) signers: Option<crate::signers::SignerPhase>,
    /// Phase "chains": raw and txmgr at each K of `--chains`.
    pub(crate) chains: Option<crate::chains::ChainsReport>,
    /// Phase "history": the txmgr phases on databases holding a history.
    pub(crate) history: Vec<crate::history::HistoryRun>,
}
