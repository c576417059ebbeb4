//! `txmgr-bench`: measures txmgr against the raw-send ceiling in one
//! process, against one private anvil and one fresh PostgreSQL database
//! (README "Benchmark").
//!
//! ```text
//!  raw:  pre-signed transfers ──eth_sendRawTransaction──────────────────► anvil --no-mining
//!  one:  HTTP client ──POST /v1/transactions──► axum ─► engine ─► PG ─► anvil  (1 submitter)
//!  many: the same over each --submitters count          ▲ poll TRACKING every 20 ms
//!  ack:  open-loop creates at --ack-rate for --ack-duration (latency only)
//!  idle: a real `txmgr run` process with --idle-submitters submitters: time
//!        to ready, RSS and database transactions/s while idle, before and
//!        after --idle-used of them did work; then SIGKILL fail-over to a
//!        second process
//!  chains: per K of --chains, K anvils: raw sends over them, then one
//!        node serving K chains, the same submitters on each
//! ```
//!
//! Every phase uses its own deterministic keys, so nonces never collide.
//! Nothing is mined in the closed-loop phases: in-flight slots never free,
//! so `max_in_flight` covers every intent of the run. Run it in release:
//! `cargo build --release --workspace --bins && target/release/txmgr-bench -n 2000 -c 64`.

mod anvil;
mod chain_stats;
mod chains;
mod cpu;
mod daemon;
mod daemon_pass;
mod history;
mod history_print;
mod history_retention;
mod history_soak;
mod idle;
mod idle_failover;
mod idle_report;
mod keys;
mod load;
mod node;
mod otlp_sink;
mod phases;
mod raw;
mod report;
mod row_versions;
mod session;
mod signers;
mod table;
mod tls_proxy;
mod wal_relations;
mod webhooks;

use std::{process::ExitCode, time::Duration};

use clap::{Parser, ValueEnum};

/// jemalloc instead of glibc malloc: the engine allocates and frees many
/// small buffers per intent (JSON, RPC, SQL), which glibc made costly, and
/// jemalloc returns a burst's freed pages to the OS (mimalloc kept them).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use crate::{
    anvil::Anvil,
    daemon_pass::{DaemonPass, DaemonVariant},
    idle::IdleArgs,
    keys::KeyPlan,
    node::BenchDb,
    report::Report,
    session::{run_txmgr, RpcTarget},
};

/// Recipient of every benchmark transfer.
pub(crate) const SINK: &str = "0x000000000000000000000000000000000000beef";

/// Admin URL when `DATABASE_URL` is unset (the one `scripts/test.sh` uses).
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Gas limit given to each intent unless `--estimate-gas`.
pub(crate) const TRANSFER_GAS: u64 = 21_000;

/// Benchmark txmgr end to end against the raw-send ceiling.
#[derive(Debug, Clone, Parser)]
#[command(name = "txmgr-bench", about, long_about = None)]
pub(crate) struct Args {
    /// Transfers per phase.
    #[arg(short = 'n', long = "count", default_value_t = 2000)]
    count: usize,
    /// Requests in flight at once (raw sends and closed-loop creates).
    #[arg(short = 'c', long, default_value_t = 64)]
    concurrency: usize,
    /// Submitters (and raw keys) of the "many" phases, comma separated: one
    /// raw and one txmgr phase per count, e.g. `100,1000`.
    #[arg(long, value_delimiter = ',', default_value = "100",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    submitters: Vec<u16>,
    /// Engine `batch_size`.
    #[arg(long, default_value_t = 64)]
    batch_size: u32,
    /// Omit `gas_limit` from intents so the engine estimates gas.
    #[arg(long)]
    estimate_gas: bool,
    /// Phases to run, comma separated (`idle` needs the `txmgr` binary).
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
    /// Engine `chain.batch_sends = false`: one JSON-RPC request per
    /// transaction, as before batched sends (for comparisons).
    #[arg(long)]
    no_batch_sends: bool,
    /// Run the txmgr phases ("one", "many") a second time in the same run,
    /// on a fresh node and database whose submitters all have a spend limit
    /// (`value` and `fees`) far above what the run sends, so it never holds
    /// an intent back: the two passes side by side give the spend ledger's
    /// cost per intent.
    #[arg(long)]
    spend_limit: bool,
    /// Bound on reaching TRACKING, from the first POST of a phase.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    tracking_timeout: Duration,
    /// Bound on the whole run, plus the `--soak` length and 4 minutes per
    /// million `--history` intents (a load of 10 million takes 20 to 30
    /// minutes here): a long history run must not die at its end.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
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
    /// Also run the closed-loop "one" phase with its submitter's key on a
    /// SoftHSM2 token (the `pkcs11` signer; a token made for the run), on a
    /// fresh database, beside the env-key row (Debian softhsm2 and opensc).
    #[arg(long)]
    one_pkcs11: bool,
    /// Also run the closed-loop txmgr phases ("one", "many") against a real
    /// `txmgr run` process (`--txmgr`, else the binary next to this one)
    /// started with the in-process node's settings and the shipped logging,
    /// on a fresh database: the figure a user running the daemon gets, its
    /// CPU counted apart from this process (the HTTP client).
    #[arg(long)]
    daemon: bool,
    /// With `--daemon`: the daemon passes, each on its own database, keys and
    /// process: `plain` (as shipped), `tracing` (every trace exported to a
    /// collector in this process that drops it), `token` (bearer tokens
    /// configured, creates carry one). Comma separated, in this order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "plain")]
    daemon_variants: Vec<daemon_pass::DaemonVariant>,
    /// Phase "webhooks": events of the burst.
    #[arg(long, default_value_t = 5000)]
    webhook_events: usize,
    /// Phase "webhooks": submitters the events are spread over.
    #[arg(long, default_value_t = 100)]
    webhook_submitters: usize,
    /// Phase "webhooks": the webhook's `concurrency`.
    #[arg(long, default_value_t = 16)]
    webhook_concurrency: usize,
    /// Phase "webhooks": open-loop events per second (latency).
    #[arg(long, default_value_t = 200.0)]
    webhook_rate: f64,
    /// Phase "signers": signatures per measurement.
    #[arg(long, default_value_t = 500)]
    signer_count: usize,
    /// Phase "signers": signatures in flight for the throughput figure.
    #[arg(long, default_value_t = 8)]
    signer_concurrency: usize,
    /// Phase "chains": the chain counts K to measure, comma separated (K
    /// anvils each, `--count` transfers per chain; raw and txmgr side by
    /// side at each K).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    chains: Vec<u16>,
    /// Phase "chains": submitters (and raw keys), the same on every chain.
    #[arg(long, default_value_t = 10)]
    chains_submitters: usize,
    /// Phase "history": for each size N (comma separated, e.g.
    /// `1000000,10000000`), a fresh database loaded with N final intents
    /// (bench/sql/history.sql), then the txmgr phases on it, side by side
    /// with the same phases on the run's empty database.
    #[arg(long, value_delimiter = ',')]
    history: Vec<u64>,
    /// Phase "history": also run "many" again while history retention
    /// deletes the oldest of the history's 31 days (retain 30 days).
    #[arg(long)]
    history_retention: bool,
    /// Phase "history": run the phases once more after dropping the OS
    /// page cache (root), so they start from disk: with a database larger
    /// than `shared_buffers`, the working set is out of memory.
    #[arg(long)]
    history_drop_caches: bool,
    /// Phase "history": after each size's phases (and its retention run),
    /// the same phases once more on a fresh empty database, and each ratio
    /// against the mean of the empty database before and after: the
    /// machine's drift over the long run taken out of the comparison.
    #[arg(long)]
    history_rebaseline: bool,
    /// Phase "history", last size: a sustained run of this long (e.g.
    /// `10m`) at `--soak-rate` open-loop creates, blocks mined every second
    /// so intents finish, while retention deletes old history at the rate
    /// the run creates; then dead rows and bloat of the hot tables
    /// (`pg_stat_user_tables`, `pgstattuple_approx`).
    #[arg(long, value_parser = humantime::parse_duration)]
    soak: Option<Duration>,
    /// Open-loop creates per second of `--soak`.
    #[arg(long, default_value_t = 200.0)]
    soak_rate: f64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    idle: IdleArgs,
}

/// A phase of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Phase {
    /// Pre-signed `eth_sendRawTransaction` with 1 key and with each
    /// `--submitters` count of keys.
    Raw,
    /// txmgr with one submitter.
    One,
    /// txmgr with each `--submitters` count of submitters.
    Many,
    /// A real daemon with `--idle-submitters` submitters: start-up, idle
    /// cost before and after work, fail-over.
    Idle,
    /// Webhook delivery alone: a burst of feed events, then an open-loop
    /// rate, to a receiver in this process.
    Webhooks,
    /// Signing latency and throughput per key: an env key and a KMS key
    /// (LocalStack from `scripts/install-localstack.sh`).
    Signers,
    /// Raw and txmgr at each K of `--chains` chains.
    Chains,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    // A count given twice would run twice under the same request ids.
    let mut seen = std::collections::HashSet::new();
    args.submitters.retain(|count| seen.insert(*count));
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let counts: Vec<usize> = args.submitters.iter().map(|c| usize::from(*c)).collect();
    let chain_submitters = if args.phases.contains(&Phase::Chains) {
        args.chains_submitters.max(1)
    } else {
        0
    };
    let plan = match KeyPlan::new(
        &counts,
        args.rpc_tls,
        args.spend_limit,
        &daemon_variants(&args),
        chain_submitters,
        args.history.len(),
    ) {
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
    if args.phases.contains(&Phase::Signers) {
        std::env::set_var(signers::ENV_KEY_VAR, signers::ENV_KEY);
        // LocalStack takes any credentials; real ones in the environment stay.
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            std::env::set_var("AWS_ACCESS_KEY_ID", "test");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        }
        std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
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

/// The run's bound: `--deadline`, the soak's length and 4 minutes per
/// million history intents.
fn run_deadline(args: &Args) -> Duration {
    let history: u64 = args.history.iter().sum();
    args.deadline
        + args.soak.unwrap_or_default()
        + Duration::from_secs(history.div_ceil(1_000_000) * 240)
}

/// Starts anvil and the database, runs the phases under the global
/// deadline, and drops the database whatever happened.
async fn run(args: &Args, plan: &KeyPlan) -> anyhow::Result<Report> {
    let admin_url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
    let anvil = anvil::start().await?;
    let db = BenchDb::create(&admin_url, args.unsafe_async_commit).await?;
    let deadline = run_deadline(args);
    let result = tokio::time::timeout(deadline, run_phases(args, plan, &anvil, &db, &admin_url))
        .await
        .unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "global deadline of {deadline:?} passed (--deadline)"
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
        raw_many: Vec::new(),
        one: None,
        many: Vec::new(),
        ack: None,
        one_tls: None,
        one_spend: None,
        many_spend: Vec::new(),
        one_pkcs11: None,
        daemon: Vec::new(),
        many_tls: Vec::new(),
        idle: None,
        webhooks: None,
        signers: None,
        chains: None,
        history: Vec::new(),
    };
    if args.phases.contains(&Phase::Raw) {
        anvil::fund(anvil, &keys::addresses(&plan.raw_one)).await?;
        let one = raw::run(anvil, &plan.raw_one, args.count, args.concurrency).await?;
        anvil::drop_all_transactions(anvil).await?;
        report.raw_one = Some(one);
        for keys_of_phase in &plan.raw_many {
            anvil::fund(anvil, &keys::addresses(keys_of_phase)).await?;
            let many = raw::run(anvil, keys_of_phase, args.count, args.concurrency).await?;
            anvil::drop_all_transactions(anvil).await?;
            report.raw_many.push(many);
        }
    }
    let wants_txmgr = args.phases.contains(&Phase::One)
        || args.phases.contains(&Phase::Many)
        || args.ack_rate.is_some();
    if wants_txmgr {
        let rpc = RpcTarget {
            url: anvil.rpc_url(),
            ca_file: None,
        };
        let phases = run_txmgr(args, &plan.txmgr, &rpc, anvil, db, true, false).await?;
        (report.one, report.many, report.ack) = (phases.one, phases.many, phases.ack);
    }
    if args.rpc_tls && wants_txmgr {
        let upstream = anvil.rpc_url();
        let upstream = upstream.trim_start_matches("http://");
        let terminator = tls_proxy::TlsTerminator::start(upstream).await?;
        let rpc = RpcTarget {
            url: terminator.url.clone(),
            ca_file: Some(terminator.ca_file.clone()),
        };
        let tls_db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let phases = run_txmgr(args, &plan.txmgr_tls, &rpc, anvil, &tls_db, false, false).await;
        if let Err(e) = tls_db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        let phases = phases?;
        (report.one_tls, report.many_tls) = (phases.one, phases.many);
    }
    if args.spend_limit && wants_txmgr {
        let rpc = RpcTarget {
            url: anvil.rpc_url(),
            ca_file: None,
        };
        let spend_db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let phases = run_txmgr(args, &plan.txmgr_spend, &rpc, anvil, &spend_db, false, true).await;
        if let Err(e) = spend_db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        let phases = phases?;
        (report.one_spend, report.many_spend) = (phases.one, phases.many);
    }
    for (variant, keys_of_node) in &plan.txmgr_daemon {
        let daemon_db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let pass = daemon_pass::run_daemon(args, *variant, keys_of_node, anvil, &daemon_db).await;
        if let Err(e) = daemon_db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        report.daemon.push(pass?);
    }
    if args.one_pkcs11 && args.phases.contains(&Phase::One) {
        let hsm_db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let phase = session::run_one_on_pkcs11(args, anvil, &hsm_db).await;
        if let Err(e) = hsm_db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        report.one_pkcs11 = Some(phase?);
    }
    if args.phases.contains(&Phase::Webhooks) {
        report.webhooks = Some(
            webhooks::run(
                db,
                args.webhook_events,
                args.webhook_submitters,
                args.webhook_concurrency,
                args.webhook_rate,
            )
            .await?,
        );
    }
    if args.phases.contains(&Phase::Signers) {
        report.signers = Some(signers::run(args.signer_count, args.signer_concurrency).await?);
    }
    if args.phases.contains(&Phase::Chains) {
        report.chains = Some(chains::run(args, &plan.chains, admin_url).await?);
    }
    if !args.history.is_empty() {
        report.history = history::run(args, &plan.history, anvil, admin_url).await?;
    }
    if args.phases.contains(&Phase::Idle) {
        report.idle = Some(idle::run(args, anvil, admin_url).await?);
    }
    set_ratios(&mut report);
    Ok(report)
}

/// The daemon passes to run: `--daemon-variants` without repeats when
/// `--daemon` is given and a closed-loop txmgr phase runs, else none.
fn daemon_variants(args: &Args) -> Vec<DaemonVariant> {
    let closed_loop = args.phases.contains(&Phase::One) || args.phases.contains(&Phase::Many);
    let mut variants = Vec::new();
    if args.daemon && closed_loop {
        for variant in &args.daemon_variants {
            if !variants.contains(variant) {
                variants.push(*variant);
            }
        }
    }
    variants
}

/// Each txmgr phase's end-to-end rate over the raw rate with as many keys.
fn set_ratios(report: &mut Report) {
    let raws: Vec<(usize, f64)> = report
        .raw_one
        .iter()
        .chain(&report.raw_many)
        .map(|raw| (raw.keys, raw.tx_per_s))
        .collect();
    for phase in report
        .one
        .iter_mut()
        .chain(&mut report.many)
        .chain(&mut report.one_tls)
        .chain(&mut report.many_tls)
        .chain(&mut report.one_spend)
        .chain(&mut report.many_spend)
        .chain(&mut report.one_pkcs11)
        .chain(report.daemon.iter_mut().flat_map(DaemonPass::phases_mut))
    {
        if let Some((_, raw_rate)) = raws.iter().find(|(keys, _)| *keys == phase.submitters) {
            phase.ratio_vs_raw = Some(phase.e2e_tx_per_s / raw_rate);
        }
    }
}
