//! What a run measured, printed as a table or as JSON (`--json`).

use std::time::Duration;

use serde::Serialize;

use crate::{chain_stats::MethodCost, cpu::CpuCost};

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
    /// Raw send with as many keys as submitters.
    pub(crate) raw_many: Option<RawPhase>,
    /// txmgr, one submitter.
    pub(crate) one: Option<TxmgrPhase>,
    /// txmgr, many submitters.
    pub(crate) many: Option<TxmgrPhase>,
    /// Open-loop ack latency.
    pub(crate) ack: Option<AckPhase>,
    /// `--rpc-tls`: txmgr, one submitter, JSON-RPC over HTTPS.
    pub(crate) one_tls: Option<TxmgrPhase>,
    /// `--rpc-tls`: txmgr, many submitters, JSON-RPC over HTTPS.
    pub(crate) many_tls: Option<TxmgrPhase>,
}

impl Report {
    /// The human-readable table.
    pub(crate) fn print_table(&self) {
        println!(
            "txmgr-bench: n={} c={} batch_size={} gas_limit={} cpus={}{}",
            self.count,
            self.concurrency,
            self.batch_size,
            if self.fixed_gas_limit {
                "21000"
            } else {
                "estimated"
            },
            self.cpus,
            if self.async_commit {
                " synchronous_commit=off (DIAGNOSTIC: acks not durable)"
            } else {
                ""
            }
        );
        println!(
            "{:<24} {:>5} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8}",
            "phase", "keys", "tx/s", "acks/s", "p50 ms", "p99 ms", "max ms", "vs raw"
        );
        for raw in [&self.raw_one, &self.raw_many].into_iter().flatten() {
            let l = &raw.send_latency;
            println!(
                "{:<24} {:>5} {:>10.0} {:>10} {:>9.2} {:>9.2} {:>9.2} {:>8}",
                "raw eth_sendRawTx",
                raw.keys,
                raw.tx_per_s,
                "-",
                l.p50_ms,
                l.p99_ms,
                l.max_ms,
                "1.00"
            );
        }
        for (name, phase) in [
            ("txmgr HTTP→TRACKING", &self.one),
            ("txmgr HTTP→TRACKING", &self.many),
            ("txmgr, RPC over HTTPS", &self.one_tls),
            ("txmgr, RPC over HTTPS", &self.many_tls),
        ] {
            let Some(p) = phase else { continue };
            let l = &p.ack_latency;
            let ratio = p.ratio_vs_raw.map_or("-".to_owned(), |r| format!("{r:.2}"));
            println!(
                "{:<24} {:>5} {:>10.0} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>8}",
                name,
                p.submitters,
                p.e2e_tx_per_s,
                p.acks_per_s,
                l.p50_ms,
                l.p99_ms,
                l.max_ms,
                ratio
            );
        }
        if let Some(a) = &self.ack {
            let l = &a.ack_latency;
            println!(
                "{:<24} {:>5} {:>10} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>8}",
                "open-loop creates",
                a.submitters,
                "-",
                a.rate_per_s,
                l.p50_ms,
                l.p99_ms,
                l.max_ms,
                "-"
            );
        }
        println!(
            "(raw rows: latency of one send; txmgr rows: tx/s = end to end, latency = create ack)"
        );
        for raw in [&self.raw_one, &self.raw_many].into_iter().flatten() {
            println!(
                "raw send, {} key(s): CPU per tx: sender {:.3} ms, anvil {:.3} ms",
                raw.keys, raw.cpu.bench_ms_per_tx, raw.cpu.anvil_ms_per_tx
            );
        }
        for phase in [&self.one, &self.many].into_iter().flatten() {
            print_diagnostics(phase);
        }
        for phase in [&self.one_tls, &self.many_tls].into_iter().flatten() {
            println!("\n(RPC over HTTPS)");
            print_diagnostics(phase);
        }
    }
}

fn print_diagnostics(p: &TxmgrPhase) {
    let s = &p.pipeline;
    println!(
        "\n{} submitter(s): {} ingress commits, {} broadcast batches (mean {:.1} intents), \
         insert→TRACKING p50 {:.1} ms p99 {:.1} ms; ack phase {:.0} ms, e2e {:.0} ms",
        p.submitters,
        s.ingress_commits,
        s.broadcast_commits,
        s.mean_batch,
        s.queue_to_tracking_p50_ms,
        s.queue_to_tracking_p99_ms,
        p.ack_elapsed_ms,
        p.e2e_ms
    );
    println!(
        "  CPU per intent: bench process (client+HTTP+engine) {:.3} ms, anvil {:.3} ms, \
         postgres {:.3} ms",
        p.cpu.bench_ms_per_tx, p.cpu.anvil_ms_per_tx, p.cpu.postgres_ms_per_tx
    );
    println!(
        "  {:<14} {:>8} {:>10} {:>10} {:>9}",
        "chain call", "calls", "per intent", "RPC/intent", "mean ms"
    );
    for c in &p.chain_calls {
        println!(
            "  {:<14} {:>8} {:>10.3} {:>10.3} {:>9.2}",
            c.method, c.calls, c.per_intent, c.rpc_per_intent, c.mean_ms
        );
    }
}
