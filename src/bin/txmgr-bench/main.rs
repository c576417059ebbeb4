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
mod tls_proxy;

use std::{process::ExitCode, time::Duration};

use alloy::primitives::Address;
use anyhow::Context;
use clap::{Parser, ValueEnum};

use crate::{
    anvil::Anvil,
    keys::{KeyPlan, TxmgrKeys},
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
    /// Also run the closed-loop txmgr phases with the engine's JSON-RPC over
    /// `https://` (a TLS terminator in front of the same anvil, a CA made for
    /// the run), right after the plain-HTTP ones, on a fresh database.
    #[arg(long)]
    rpc_tls: bool,
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

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let plan = match KeyPlan::new(usize::from(args.submitters), args.rpc_tls) {
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
    let result = tokio::time::timeout(
        args.deadline,
        run_phases(args, plan, &anvil, &db, &admin_url),
    )
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
    admin_url: &str,
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
        one_tls: None,
        many_tls: None,
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
        let rpc = RpcTarget {
            url: anvil.url.clone(),
            ca_file: None,
        };
        let phases = run_txmgr(args, &plan.txmgr, &rpc, anvil, db, true).await?;
        (report.one, report.many, report.ack) = (phases.one, phases.many, phases.ack);
    }
    if args.rpc_tls && wants_txmgr {
        let upstream = anvil.url.trim_start_matches("http://");
        let terminator = tls_proxy::TlsTerminator::start(upstream).await?;
        let rpc = RpcTarget {
            url: terminator.url.clone(),
            ca_file: Some(terminator.ca_file.clone()),
        };
        let tls_db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let phases = run_txmgr(args, &plan.txmgr_tls, &rpc, anvil, &tls_db, false).await;
        if let Err(e) = tls_db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        let phases = phases?;
        (report.one_tls, report.many_tls) = (phases.one, phases.many);
    }
    for (phase, raw) in [
        (&mut report.one, &report.raw_one),
        (&mut report.many, &report.raw_many),
        (&mut report.one_tls, &report.raw_one),
        (&mut report.many_tls, &report.raw_many),
    ] {
        if let (Some(phase), Some(raw)) = (phase, raw) {
            phase.ratio_vs_raw = Some(phase.e2e_tx_per_s / raw.tx_per_s);
        }
    }
    Ok(report)
}

/// Where the node under test sends its JSON-RPC.
struct RpcTarget {
    url: String,
    ca_file: Option<std::path::PathBuf>,
}

/// What one node measured.
struct TxmgrPhases {
    one: Option<report::TxmgrPhase>,
    many: Option<report::TxmgrPhase>,
    ack: Option<report::AckPhase>,
}

/// Starts one node with `keys` as submitters, its RPC at `rpc`, and runs the
/// txmgr phases (the open-loop one only with `with_ack`).
async fn run_txmgr(
    args: &Args,
    keys_of_node: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    db: &BenchDb,
    with_ack: bool,
) -> anyhow::Result<TxmgrPhases> {
    let submitters = keys_of_node.submitters();
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
    let mut toml = node::config_toml(&db.url, &rpc.url, &settings, &env_submitters);
    if let Some(ca_file) = &rpc.ca_file {
        toml = toml.replace(
            "[chain]\n",
            &format!("[chain]\nca_file = \"{}\"\n", ca_file.display()),
        );
    }
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
    let one_address = keys::addresses(&keys_of_node.one);
    let many_addresses = keys::addresses(&keys_of_node.many);
    let mut phases = TxmgrPhases {
        one: None,
        many: None,
        ack: None,
    };
    let outcome = async {
        if args.phases.contains(&Phase::One) {
            phases.one = Some(bench.closed_loop(&one_address, args.count, "one").await?);
        }
        if args.phases.contains(&Phase::Many) {
            phases.many = Some(
                bench
                    .closed_loop(&many_addresses, args.count, "many")
                    .await?,
            );
        }
        if let (Some(rate), true) = (args.ack_rate, with_ack) {
            phases.ack = Some(
                bench
                    .open_loop(&many_addresses, rate, args.ack_duration)
                    .await?,
            );
        }
        anyhow::Ok(())
    }
    .await;
    node.stop().await;
    outcome.map(|()| phases)
}
