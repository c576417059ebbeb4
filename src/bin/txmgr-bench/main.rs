//! `txmgr-bench`: measures txmgr against the raw-send ceiling in one
//! process, against one private anvil and one fresh PostgreSQL database
//! (DESIGN.md section 16).
//!
//! ```text
//!  raw:  pre-signed transfers ──eth_sendRawTransaction──────────────────► anvil --no-mining
//!  one:  HTTP client ──POST /v1/transactions──► axum ─► engine ─► PG ─► anvil  (1 submitter)
//!  many: the same over --submitters submitters          ▲ poll TRACKING every 20 ms
//!  ack:  open-loop creates at --ack-rate for --ack-duration (latency only)
//! ```
//!
//! Every phase uses its own deterministic keys, so nonces never collide.
//! Nothing is mined: in-flight slots never free, so `max_in_flight` covers
//! every intent of the run. Run it in release:
//! `cargo run --release --bin txmgr-bench -- -n 2000 -c 64`.

mod anvil;
mod chain_stats;
mod cpu;
mod keys;
mod load;
mod node;
mod phases;
mod raw;
mod report;

use std::{process::ExitCode, time::Duration};

use alloy::{primitives::Address, signers::local::PrivateKeySigner};
use anyhow::Context;
use clap::{Parser, ValueEnum};

use crate::{
    anvil::Anvil,
    node::{BenchDb, Node, NodeSettings},
    phases::TxmgrBench,
    report::Report,
};

/// Recipient of every benchmark transfer.
pub(crate) const SINK: &str = "0x000000000000000000000000000000000000beef";

/// Admin URL when `DATABASE_URL` is unset (the one `scripts/test.sh` uses).
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Gas limit given to each intent unless `--estimate-gas`.
const TRANSFER_GAS: u64 = 21_000;

/// Benchmark txmgr end to end against the raw-send ceiling.
#[derive(Debug, Parser)]
#[command(about, long_about = None)]
struct Args {
    /// Transfers per phase.
    #[arg(short = 'n', long = "count", default_value_t = 2000)]
    count: usize,
    /// Requests in flight at once (raw sends and closed-loop creates).
    #[arg(short = 'c', long, default_value_t = 64)]
    concurrency: usize,
    /// Submitters (and raw keys) of the "many" phases.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
    submitters: u16,
    /// Engine `batch_size`.
    #[arg(long, default_value_t = 64)]
    batch_size: u32,
    /// Omit `gas_limit` from intents so the engine estimates gas.
    #[arg(long)]
    estimate_gas: bool,
    /// Phases to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "raw,one,many")]
    phases: Vec<Phase>,
    /// Also offer open-loop creates at this rate per second (over
    /// `--submitters` submitters) and report ack latency.
    #[arg(long)]
    ack_rate: Option<f64>,
    /// How long to offer `--ack-rate`.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    ack_duration: Duration,
    /// Engine database pool size.
    #[arg(long, default_value_t = 32)]
    db_connections: u32,
    /// Engine `chain.poll_interval` (per-submitter chain check period).
    #[arg(long, default_value = "1s")]
    poll_interval: String,
    /// Bound on reaching TRACKING, from the first POST of a phase.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    tracking_timeout: Duration,
    /// Bound on the whole run.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    deadline: Duration,
    /// Diagnostic only: `synchronous_commit = off` on the bench database, so
    /// acks are no longer durable. Shows how much of the time is WAL flushes.
    #[arg(long)]
    unsafe_async_commit: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A closed-loop phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    /// Pre-signed `eth_sendRawTransaction` with 1 and with `--submitters` keys.
    Raw,
    /// txmgr with one submitter.
    One,
    /// txmgr with `--submitters` submitters.
    Many,
}

/// The keys of a run, drawn before the runtime starts because the engine's
/// `env` signers read them from the environment.
struct KeyPlan {
    raw_one: Vec<PrivateKeySigner>,
    raw_many: Vec<PrivateKeySigner>,
    txmgr_one: Vec<PrivateKeySigner>,
    txmgr_many: Vec<PrivateKeySigner>,
}

impl KeyPlan {
    fn new(submitters: usize) -> anyhow::Result<KeyPlan> {
        Ok(KeyPlan {
            raw_one: keys::bench_keys(keys::RAW_ONE_BASE, 1)?,
            raw_many: keys::bench_keys(keys::RAW_MANY_BASE, submitters)?,
            txmgr_one: keys::bench_keys(keys::TXMGR_ONE_BASE, 1)?,
            txmgr_many: keys::bench_keys(keys::TXMGR_MANY_BASE, submitters)?,
        })
    }

    /// txmgr submitters with the variable holding each key.
    fn submitters(&self) -> Vec<(Address, String, &PrivateKeySigner)> {
        self.txmgr_one
            .iter()
            .chain(&self.txmgr_many)
            .enumerate()
            .map(|(i, key)| (key.address(), format!("TXMGR_BENCH_KEY_{i}"), key))
            .collect()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let plan = match KeyPlan::new(usize::from(args.submitters)) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("txmgr-bench: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    // Set while this is the only thread: no runtime, no engine yet.
    for (_, var, key) in plan.submitters() {
        std::env::set_var(var, keys::private_key_hex(key));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("txmgr-bench: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args, &plan)) {
        Ok(report) if args.json => match serde_json::to_string_pretty(&report) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("txmgr-bench: report: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(report) => {
            report.print_table();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("txmgr-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Starts anvil and the database, runs the phases under the global
/// deadline, and drops the database whatever happened.
async fn run(args: &Args, plan: &KeyPlan) -> anyhow::Result<Report> {
    let admin_url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
    let anvil = Anvil::start().await?;
    let db = BenchDb::create(&admin_url, args.unsafe_async_commit).await?;
    let result = tokio::time::timeout(args.deadline, run_phases(args, plan, &anvil, &db))
        .await
        .unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "global deadline of {:?} passed",
                args.deadline
            ))
        });
    if let Err(e) = db.drop_db().await {
        eprintln!("txmgr-bench: warning: {e:#}");
    }
    result
}

async fn run_phases(
    args: &Args,
    plan: &KeyPlan,
    anvil: &Anvil,
    db: &BenchDb,
) -> anyhow::Result<Report> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut report = Report {
        cpus,
        count: args.count,
        concurrency: args.concurrency,
        batch_size: args.batch_size,
        fixed_gas_limit: !args.estimate_gas,
        async_commit: args.unsafe_async_commit,
        raw_one: None,
        raw_many: None,
        one: None,
        many: None,
        ack: None,
    };
    if args.phases.contains(&Phase::Raw) {
        anvil.fund(&keys::addresses(&plan.raw_one)).await?;
        anvil.fund(&keys::addresses(&plan.raw_many)).await?;
        let one = raw::run(anvil, &plan.raw_one, args.count, args.concurrency).await?;
        anvil.drop_all_transactions().await?;
        report.raw_one = Some(one);
        let many = raw::run(anvil, &plan.raw_many, args.count, args.concurrency).await?;
        anvil.drop_all_transactions().await?;
        report.raw_many = Some(many);
    }
    let wants_txmgr = args.phases.iter().any(|p| *p != Phase::Raw) || args.ack_rate.is_some();
    if wants_txmgr {
        run_txmgr(args, plan, anvil, db, &mut report).await?;
    }
    if let (Some(one), Some(raw)) = (&mut report.one, &report.raw_one) {
        one.ratio_vs_raw = Some(one.e2e_tx_per_s / raw.tx_per_s);
    }
    if let (Some(many), Some(raw)) = (&mut report.many, &report.raw_many) {
        many.ratio_vs_raw = Some(many.e2e_tx_per_s / raw.tx_per_s);
    }
    Ok(report)
}

/// Starts one node with every txmgr submitter and runs the txmgr phases.
async fn run_txmgr(
    args: &Args,
    plan: &KeyPlan,
    anvil: &Anvil,
    db: &BenchDb,
    report: &mut Report,
) -> anyhow::Result<()> {
    let submitters = plan.submitters();
    let addresses: Vec<Address> = submitters.iter().map(|(a, _, _)| *a).collect();
    anvil.fund(&addresses).await?;
    let ack_total = args
        .ack_rate
        .map_or(0, |r| (r * args.ack_duration.as_secs_f64()).ceil() as u64);
    let settings = NodeSettings {
        // Nothing is mined: every intent of the run (plus warm-ups) holds a slot.
        max_in_flight: args.count as u64 + ack_total + 16,
        batch_size: args.batch_size,
        ingress_capacity: (args.concurrency * 2).max(10_000),
        db_connections: args.db_connections,
        poll_interval: args.poll_interval.clone(),
    };
    let env_submitters: Vec<(Address, String)> = submitters
        .iter()
        .map(|(a, var, _)| (*a, var.clone()))
        .collect();
    let toml = node::config_toml(&db.url, &anvil.url, &settings, &env_submitters);
    let node = Node::start(&toml).await.context("starting the node")?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency.max(256))
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()
        .context("HTTP client")?;
    let bench = TxmgrBench {
        client,
        node: &node,
        db,
        concurrency: args.concurrency,
        gas_limit: (!args.estimate_gas).then_some(TRANSFER_GAS),
        tracking_timeout: args.tracking_timeout,
        anvil_pid: anvil.pid(),
    };
    let one_address = keys::addresses(&plan.txmgr_one);
    let many_addresses = keys::addresses(&plan.txmgr_many);
    let outcome = async {
        if args.phases.contains(&Phase::One) {
            report.one = Some(bench.closed_loop(&one_address, args.count, "one").await?);
        }
        if args.phases.contains(&Phase::Many) {
            report.many = Some(
                bench
                    .closed_loop(&many_addresses, args.count, "many")
                    .await?,
            );
        }
        if let Some(rate) = args.ack_rate {
            report.ack = Some(
                bench
                    .open_loop(&many_addresses, rate, args.ack_duration)
                    .await?,
            );
        }
        anyhow::Ok(())
    }
    .await;
    node.stop().await;
    outcome
}
