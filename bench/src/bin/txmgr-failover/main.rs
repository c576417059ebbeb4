//! `txmgr-failover`: measures fail-over with real daemon processes (a
//! benchmark, not a test). Two nodes share one database and one anvil
//! (`--no-mining`); creates flow at a steady rate to the node that survives;
//! the leader of the submitter is SIGKILLed, and the database clock times
//! the successor's take-over, its first fenced write of an attempt, and the
//! return of TRACKING throughput to 90% of the rate before the kill.
//!
//! `cargo build --release --workspace --bins && target/release/txmgr-failover --runs 3`

use std::{path::PathBuf, process::Stdio, str::FromStr, time::Duration};

use anyhow::Context;
use clap::Parser;
use serde_json::json;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    ConnectOptions, PgPool,
};
use tokio::process::{Child, Command};

/// Address of anvil's first dev key (the kit's `DEV_PRIVATE_KEY_0`, funded
/// by anvil itself), lowercase as the database stores it.
const DEV_ADDRESS: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";

/// Fail-over timing with real daemon processes.
#[derive(Debug, Parser)]
#[command(about, long_about = None)]
struct Args {
    /// Kills to measure (the two nodes take turns).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Creates per second offered to the surviving node.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// `lease.duration`.
    #[arg(long, default_value = "10s")]
    lease_duration: String,
    /// `lease.renew_interval`.
    #[arg(long, default_value = "3s")]
    renew_interval: String,
    /// `lease.clock_skew_allowance`.
    #[arg(long, default_value = "1s")]
    clock_skew: String,
    /// Steady load before each kill.
    #[arg(long, default_value = "6s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// The `txmgr` binary (default: next to this one).
    #[arg(long)]
    txmgr: Option<PathBuf>,
}

struct Node {
    id: &'static str,
    port: u16,
    config: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn start(&mut self, bin: &PathBuf) -> anyhow::Result<()> {
        let child = Command::new(bin)
            .args(["run", "--config"])
            .arg(&self.config)
            .env("FAILOVER_KEY", txmgr_testkit::DEV_PRIVATE_KEY_0)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("spawning txmgr")?;
        self.child = Some(child);
        Ok(())
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn ready(&self, client: &reqwest::Client) -> anyhow::Result<()> {
        for _ in 0..600 {
            if let Ok(r) = client.get(format!("{}/readyz", self.base())).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("node {} not ready within 60 s", self.id)
    }
}

fn config(args: &Args, db_url: &str, rpc: &str, id: &str, port: u16) -> String {
    format!(
        r#"node_id = "{id}"
[database]
url = "{db_url}"
max_connections = 16
migrate_on_start = false
[http]
listen = "127.0.0.1:{port}"
[chain]
rpc_url = "{rpc}"
chain_id = 31337
poll_interval = "1s"
[lease]
duration = "{}"
renew_interval = "{}"
clock_skew_allowance = "{}"
[node]
heartbeat_interval = "1s"
discovery_interval = "1s"
rebalance = false
[submitters."{DEV_ADDRESS}"]
signer = {{ kind = "env", env = "FAILOVER_KEY" }}
max_in_flight = 1000000
ingress_capacity = 100000
gas_limit_margin = 1.0
"#,
        args.lease_duration, args.renew_interval, args.clock_skew
    )
}

/// One measured kill, in seconds from the kill (database clock).
#[derive(Debug)]
struct Measured {
    rate_before: f64,
    take_over: f64,
    first_write: f64,
    throughput_back: f64,
}

async fn db_now(pool: &PgPool) -> anyhow::Result<f64> {
    Ok(
        sqlx::query_scalar("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8")
            .fetch_one(pool)
            .await?,
    )
}

async fn tracking(pool: &PgPool) -> anyhow::Result<(f64, i64)> {
    Ok(sqlx::query_as(
        "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8,
                count(*) FILTER (WHERE state = 'TRACKING') FROM managed_tx",
    )
    .fetch_one(pool)
    .await?)
}

/// Offers creates to `base` at `rate` per second until aborted.
fn load(
    client: reqwest::Client,
    base: String,
    rate: u32,
    prefix: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut pace = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
        for i in 0u64.. {
            pace.tick().await;
            let request = client.post(format!("{base}/v1/transactions")).json(&json!({
                "submitter": DEV_ADDRESS,
                "request_id": format!("{prefix}-{i}"),
                "to": "0x000000000000000000000000000000000000beef",
                "value": "1",
                "gas_limit": 21000,
            }));
            tokio::spawn(async move {
                let _ = request.send().await;
            });
        }
    })
}

async fn measure_one(
    pool: &PgPool,
    client: &reqwest::Client,
    args: &Args,
    nodes: &mut [Node; 2],
    run: usize,
) -> anyhow::Result<Measured> {
    let owner: String = sqlx::query_scalar("SELECT owner_node FROM submitter_lease")
        .fetch_one(pool)
        .await?;
    let (leader, survivor) = if owner == nodes[0].id { (0, 1) } else { (1, 0) };
    let load = load(
        client.clone(),
        nodes[survivor].base(),
        args.rate,
        format!("run{run}"),
    );
    tokio::time::sleep(args.warmup).await;
    let (t0, c0) = tracking(pool).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (t1, c1) = tracking(pool).await?;
    let rate_before = (c1 - c0) as f64 / (t1 - t0);
    let old_token: i64 = sqlx::query_scalar("SELECT fencing_token FROM submitter_lease")
        .fetch_one(pool)
        .await?;
    let killed_at = db_now(pool).await?;
    if let Some(mut child) = nodes[leader].child.take() {
        child.kill().await.ok();
        child.wait().await.ok();
    }
    let mut samples: Vec<(f64, i64)> = Vec::new();
    let (mut take_over, mut first_write, mut back) = (None, None, None);
    let deadline = killed_at + 120.0;
    while back.is_none() {
        let sample = tracking(pool).await?;
        anyhow::ensure!(sample.0 < deadline, "no recovery within 120 s");
        samples.push(sample);
        if take_over.is_none() {
            take_over = sqlx::query_scalar::<_, f64>(
                "SELECT EXTRACT(EPOCH FROM updated_at)::float8 FROM submitter_lease
                  WHERE fencing_token > $1",
            )
            .bind(old_token)
            .fetch_optional(pool)
            .await?;
        }
        if first_write.is_none() {
            first_write = sqlx::query_scalar::<_, Option<f64>>(
                "SELECT EXTRACT(EPOCH FROM min(created_at))::float8 FROM tx_attempt
                  WHERE fencing_token > $1",
            )
            .bind(old_token)
            .fetch_one(pool)
            .await?;
        }
        // Throughput is back once a one-second window after the take-over
        // gained at least 90% of the rate before the kill.
        if let Some(start) = take_over {
            let now = sample.0;
            if let Some(earlier) = samples
                .iter()
                .rev()
                .find(|(t, _)| *t <= now - 1.0 && *t >= start)
            {
                let rate = (sample.1 - earlier.1) as f64 / (now - earlier.0);
                if rate >= 0.9 * rate_before {
                    back = Some(now);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    load.abort();
    let bin = txmgr_bin(args)?;
    nodes[leader].start(&bin)?;
    nodes[leader].ready(client).await?;
    Ok(Measured {
        rate_before,
        take_over: take_over.unwrap_or(f64::NAN) - killed_at,
        first_write: first_write.unwrap_or(f64::NAN) - killed_at,
        throughput_back: back.unwrap_or(f64::NAN) - killed_at,
    })
}

fn txmgr_bin(args: &Args) -> anyhow::Result<PathBuf> {
    match &args.txmgr {
        Some(path) => Ok(path.clone()),
        None => Ok(std::env::current_exe()?.with_file_name("txmgr")),
    }
}

async fn run(args: Args) -> anyhow::Result<Vec<Measured>> {
    let bin = txmgr_bin(&args)?;
    anyhow::ensure!(
        bin.exists(),
        "{} not found: cargo build --release --workspace --bins",
        bin.display()
    );
    let admin = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let anvil = txmgr_testkit::Anvil::try_start(&txmgr_testkit::AnvilOptions {
        mining: txmgr_testkit::Mining::Manual,
        ..Default::default()
    })
    .await?;
    let name = format!(
        "txmgr_failover_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let mut conn = PgConnectOptions::from_str(&admin)?.connect().await?;
    sqlx::query(&format!(r#"CREATE DATABASE "{name}""#))
        .execute(&mut conn)
        .await?;
    let db_url = format!(
        "{}/{name}",
        admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b)
    );
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&db_url)
        .await?;
    txmgr_actors::store::migrate(&pool).await?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let mut nodes = ["a", "b"].map(|id| Node {
        id,
        port: 0,
        config: PathBuf::new(),
        child: None,
    });
    for node in &mut nodes {
        node.port = txmgr_testkit::try_free_port()?;
        node.config = std::env::temp_dir().join(format!("{name}-{}.toml", node.id));
        std::fs::write(
            &node.config,
            config(&args, &db_url, &anvil.rpc_url(), node.id, node.port),
        )?;
    }
    nodes[0].start(&bin)?;
    nodes[0].ready(&client).await?;
    // The first create makes node a the leader.
    client
        .post(format!("{}/v1/transactions", nodes[0].base()))
        .json(&json!({"submitter": DEV_ADDRESS, "to": "0x000000000000000000000000000000000000beef", "value": "1", "gas_limit": 21000}))
        .send()
        .await?;
    nodes[1].start(&bin)?;
    nodes[1].ready(&client).await?;
    let mut results = Vec::new();
    for run in 0..args.runs {
        results.push(measure_one(&pool, &client, &args, &mut nodes, run).await?);
    }
    for node in &mut nodes {
        if let Some(mut child) = node.child.take() {
            child.kill().await.ok();
        }
        std::fs::remove_file(&node.config).ok();
    }
    pool.close().await;
    sqlx::query(&format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#))
        .execute(&mut conn)
        .await?;
    Ok(results)
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let lease = format!(
        "lease {} / renew {} / skew {}",
        args.lease_duration, args.renew_interval, args.clock_skew
    );
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("txmgr-failover: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(results) => {
            println!("fail-over after SIGKILL of the leader ({lease}); seconds from the kill, database clock");
            println!("| run | rate before (tx/s) | take-over | first fenced attempt | throughput back (≥90%) |");
            println!("|---|---|---|---|---|");
            for (i, m) in results.iter().enumerate() {
                println!(
                    "| {} | {:.0} | {:.2} | {:.2} | {:.2} |",
                    i + 1,
                    m.rate_before,
                    m.take_over,
                    m.first_write,
                    m.throughput_back
                );
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("txmgr-failover: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
