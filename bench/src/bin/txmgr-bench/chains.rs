//! Phase "chains": what serving several chains costs. For each K of
//! `--chains`, K fresh anvils (chain ids 31337, 31338, …) and the same
//! `--chains-submitters` keys on each:
//!
//! ```text
//!  raw:   K × --count pre-signed transfers spread over the K anvils ──► K × anvil --no-mining
//!  txmgr: one node with K chains configured, a fresh database, K × --count
//!         creates spread over every (chain, submitter) pair
//! ```
//!
//! Each chain gets `--count` transfers at every K, so every (chain,
//! submitter) pair has the same work and batches alike: what changes with K
//! is only the number of chains. The ratio txmgr/raw at each K shows
//! whether per-chain overhead grows with K (the goal: the ratio at K = 4
//! within 10 % of the ratio at K = 1).

use alloy::{primitives::Address, signers::local::PrivateKeySigner};
use anyhow::Context;
use serde::Serialize;

use crate::{
    anvil::{self, Anvil},
    keys,
    node::{self, BenchDb, Node, NodeSettings},
    phases::{Target, TxmgrBench},
    raw,
    report::{RawPhase, TxmgrPhase},
    Args,
};

/// One K of `--chains`: raw and txmgr side by side.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChainsPhase {
    /// Chains (anvils) served.
    pub(crate) chains: usize,
    /// Raw sends spread over the chains, `--chains-submitters` keys.
    pub(crate) raw: RawPhase,
    /// txmgr with every chain configured, the same keys as submitters.
    pub(crate) txmgr: TxmgrPhase,
    /// `txmgr e2e tx/s / raw tx/s` at this K.
    pub(crate) ratio_vs_raw: f64,
}

/// Phase "chains" over every K, with the drift of the ratio.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChainsReport {
    /// One entry per K, in `--chains` order.
    pub(crate) phases: Vec<ChainsPhase>,
    /// Ratio at the largest K over the ratio at the smallest (1.0: no
    /// per-chain overhead; goal ≥ 0.9).
    pub(crate) ratio_drift: Option<f64>,
}

/// The keys of the phase: `raw` signs the raw sends, `txmgr` are the
/// node's submitters (their variables set before the runtime starts).
pub(crate) struct ChainKeys {
    pub(crate) raw: Vec<PrivateKeySigner>,
    pub(crate) txmgr: Vec<PrivateKeySigner>,
}

/// Runs the phase for each K of `args.chains`.
pub(crate) async fn run(
    args: &Args,
    keys_of_phase: &ChainKeys,
    admin_url: &str,
) -> anyhow::Result<ChainsReport> {
    let mut phases = Vec::with_capacity(args.chains.len());
    for k in args.chains.iter().map(|k| usize::from(*k)) {
        let anvils = anvil::start_chains(k)
            .await
            .with_context(|| format!("starting {k} anvils"))?;
        let phase = run_k(args, keys_of_phase, &anvils, admin_url)
            .await
            .with_context(|| format!("phase chains with K = {k}"))?;
        phases.push(phase);
    }
    let ratio_drift = match (phases.first(), phases.last()) {
        (Some(first), Some(last)) if phases.len() > 1 && first.ratio_vs_raw > 0.0 => {
            Some(last.ratio_vs_raw / first.ratio_vs_raw)
        }
        _ => None,
    };
    Ok(ChainsReport {
        phases,
        ratio_drift,
    })
}

async fn run_k(
    args: &Args,
    keys_of_phase: &ChainKeys,
    anvils: &[Anvil],
    admin_url: &str,
) -> anyhow::Result<ChainsPhase> {
    let anvil_refs: Vec<&Anvil> = anvils.iter().collect();
    let raw_addresses = keys::addresses(&keys_of_phase.raw);
    let txmgr_addresses = keys::addresses(&keys_of_phase.txmgr);
    for anvil in anvils {
        anvil::fund(anvil, &raw_addresses).await?;
        anvil::fund(anvil, &txmgr_addresses).await?;
    }
    let count = args.count * anvils.len();
    let raw = raw::run_on(&anvil_refs, &keys_of_phase.raw, count, args.concurrency).await?;
    for anvil in anvils {
        anvil::drop_all_transactions(anvil).await?;
    }
    let db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
    let measured = measure_txmgr(args, anvils, &db, &txmgr_addresses, count).await;
    if let Err(e) = db.drop_db().await {
        eprintln!("txmgr-bench: warning: {e:#}");
    }
    let txmgr = measured?;
    Ok(ChainsPhase {
        chains: anvils.len(),
        ratio_vs_raw: if raw.tx_per_s > 0.0 {
            txmgr.e2e_tx_per_s / raw.tx_per_s
        } else {
            0.0
        },
        raw,
        txmgr,
    })
}

/// One node serving every anvil as a chain; `count` creates over every
/// (chain, submitter) pair after one warm-up intent per pair.
async fn measure_txmgr(
    args: &Args,
    anvils: &[Anvil],
    db: &BenchDb,
    submitters: &[Address],
    count: usize,
) -> anyhow::Result<TxmgrPhase> {
    let settings = NodeSettings {
        // Nothing is mined: each pair holds its warm-up and its share.
        max_in_flight: count as u64 + 16,
        batch_size: args.batch_size,
        ingress_capacity: (args.concurrency * 2).max(10_000),
        db_connections: args.db_connections,
        poll_interval: args.poll_interval.clone(),
        batch_sends: !args.no_batch_sends,
        spend_limit: false,
    };
    let chains: Vec<(u64, String)> = anvils.iter().map(|a| (a.chain_id(), a.rpc_url())).collect();
    let env_submitters: Vec<(Address, String)> =
        submitters.iter().map(|a| (*a, keys::key_var(*a))).collect();
    let toml = node::config_toml(&db.url, &chains, &settings, &env_submitters);
    let node = Node::start(&toml).await.context("starting the node")?;
    let anvil_refs: Vec<&Anvil> = anvils.iter().collect();
    let chain_ids = anvils.iter().map(Anvil::chain_id).collect();
    let bench = TxmgrBench::new(args, Target::InProcess(&node), db, &anvil_refs, chain_ids)?;
    let tag = format!("chains{}", anvils.len());
    let outcome = bench.closed_loop(submitters, count, &tag).await;
    node.stop().await;
    outcome
}

impl ChainsReport {
    /// The phase as a table: one raw and one txmgr row per K.
    pub(crate) fn print(&self) {
        println!(
            "\n{:<26} {:>6} {:>5} {:>9} {:>7} {:>22} {:>8}",
            "chains (same keys on each)",
            "chains",
            "keys",
            "tx/s",
            "vs raw",
            "CPU ms bench/anvil/pg",
            "DB tx"
        );
        for p in &self.phases {
            let raw = &p.raw;
            println!(
                "{:<26} {:>6} {:>5} {:>9.0} {:>7} {:>22} {:>8}",
                "raw eth_sendRawTx",
                p.chains,
                raw.keys,
                raw.tx_per_s,
                "1.00",
                format!(
                    "{:.3}/{:.3}/-",
                    raw.cpu.bench_ms_per_tx, raw.cpu.anvil_ms_per_tx
                ),
                "-"
            );
            let t = &p.txmgr;
            println!(
                "{:<26} {:>6} {:>5} {:>9.0} {:>7.2} {:>22} {:>8.2}",
                "txmgr HTTP→TRACKING",
                p.chains,
                t.submitters,
                t.e2e_tx_per_s,
                p.ratio_vs_raw,
                format!(
                    "{:.3}/{:.3}/{:.3}",
                    t.cpu.bench_ms_per_tx, t.cpu.anvil_ms_per_tx, t.cpu.postgres_ms_per_tx
                ),
                t.db_transactions_per_intent
            );
        }
        if let Some(drift) = self.ratio_drift {
            println!(
                "(ratio at the largest K over the ratio at the smallest: {drift:.2}; goal ≥ 0.90)"
            );
        }
    }
}
