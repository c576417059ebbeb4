//! Phase "idle": what many configured submitters cost a real `txmgr run`
//! process while nothing happens.
//!
//! ```text
//! node A start ─► ready ─► idle window ─► 1 intent × --idle-used ─► mine until CONFIRMED
//!   ─► idle window ─► (fail-over) 1 unmined intent × --idle-used ─► node B ready ─► SIGKILL A
//!   ─► until B holds every lease A held with open work
//! ```
//!
//! A fresh database of its own, the bench's anvil, deterministic keys passed
//! in the child's environment (`env` signers). Product defaults everywhere
//! except `node.rebalance = false`, so B gets A's leases only by fail-over.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use alloy::{primitives::Address, signers::local::PrivateKeySigner};
use anyhow::{bail, Context};
use serde_json::json;
use txmgr::config::Config;

use crate::{
    anvil::{self, Anvil, CHAIN_ID},
    cpu::CpuSample,
    daemon::{txmgr_bin, Daemon},
    idle_failover,
    idle_report::{IdlePhase, IdleSample},
    keys::{self, IDLE_BASE},
    load::{self, CreateBatch},
    node::BenchDb,
    raw::millis,
    Args, TRANSFER_GAS,
};

/// How often a block is mined while waiting for finality.
const MINE_EVERY: Duration = Duration::from_millis(250);

/// Least time the used submitters' intents may take to become final.
const MIN_FINAL_TIMEOUT: Duration = Duration::from_secs(120);

/// Creates in flight at once when giving the used submitters work.
const MAX_WORK_CONCURRENCY: usize = 256;

/// Intent states that still need the node.
pub(crate) const OPEN_STATES: [&str; 4] = ["QUEUED", "ALLOCATED", "TRACKING", "STUCK"];

/// Flags of the idle phase.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct IdleArgs {
    /// Submitters configured on the idle daemon.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) idle_submitters: usize,
    /// Submitters that get one intent (mined until final) between the two
    /// idle windows, and one more (left unmined) before the fail-over.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) idle_used: usize,
    /// Length of each idle window.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub(crate) idle_window: Duration,
    /// Bound on a daemon's start until ready.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub(crate) idle_ready_timeout: Duration,
    /// Chains configured on the idle daemon, every submitter on each: the
    /// bench's anvil plus one more anvil per further chain (work goes to the
    /// first chain only).
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) idle_chains: u16,
    /// Skip the fail-over step.
    #[arg(long)]
    pub(crate) idle_no_failover: bool,
    /// The `txmgr` binary (default: `txmgr` next to this binary).
    #[arg(long)]
    pub(crate) txmgr: Option<PathBuf>,
}

/// What the idle steps share.
pub(crate) struct IdleRun<'a> {
    pub(crate) args: &'a Args,
    pub(crate) anvil: &'a Anvil,
    pub(crate) db: &'a BenchDb,
    pub(crate) client: reqwest::Client,
    pub(crate) bin: PathBuf,
    /// Every configured submitter's `(variable, key hex)`, the child's
    /// environment.
    pub(crate) env: Vec<(String, String)>,
    /// Every configured submitter, as the database stores it.
    pub(crate) all_hex: Vec<String>,
    /// The submitters that get work.
    pub(crate) used: Vec<Address>,
    /// The same, as the database stores them.
    pub(crate) used_hex: Vec<String>,
    /// The further chains' `(chain id, RPC URL)`; empty with one chain.
    pub(crate) more_chains: Vec<(u64, String)>,
}

/// Runs the idle phase on a fresh database, dropped afterwards.
pub(crate) async fn run(args: &Args, anvil: &Anvil, admin_url: &str) -> anyhow::Result<IdlePhase> {
    let idle = &args.idle;
    anyhow::ensure!(
        idle.idle_submitters >= 1 && idle.idle_used <= idle.idle_submitters,
        "--idle-used ({}) must be at most --idle-submitters ({})",
        idle.idle_used,
        idle.idle_submitters
    );
    let bin = txmgr_bin(idle.txmgr.as_deref())?;
    // Earlier phases leave their transactions pending; the blocks mined
    // here must hold only this phase's.
    anvil::drop_all_transactions(anvil).await?;
    let keys = keys::bench_keys(IDLE_BASE, idle.idle_submitters)?;
    // Idle chains: nothing is sent to them, they only have to answer.
    let mut more_anvils = Vec::new();
    for i in 1..u64::from(idle.idle_chains) {
        more_anvils.push(anvil::start_on(CHAIN_ID + i).await?);
    }
    let db = BenchDb::create(admin_url, false).await?;
    let result = async {
        let mut run = IdleRun::new(args, anvil, &db, bin, &keys)?;
        run.more_chains = more_anvils
            .iter()
            .map(|a| (a.chain_id(), a.rpc_url()))
            .collect();
        run.measure().await
    }
    .await;
    if let Err(e) = db.drop_db().await {
        eprintln!("txmgr-bench: warning: {e:#}");
    }
    result
}

impl<'a> IdleRun<'a> {
    fn new(
        args: &'a Args,
        anvil: &'a Anvil,
        db: &'a BenchDb,
        bin: PathBuf,
        keys: &[PrivateKeySigner],
    ) -> anyhow::Result<IdleRun<'a>> {
        let addresses = keys::addresses(keys);
        let used = addresses[..args.idle.idle_used].to_vec();
        Ok(IdleRun {
            args,
            anvil,
            db,
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(MAX_WORK_CONCURRENCY)
                .timeout(Duration::from_secs(60))
                .build()
                .context("HTTP client")?,
            bin,
            env: keys
                .iter()
                .enumerate()
                .map(|(i, key)| (key_var(i), keys::private_key_hex(key)))
                .collect(),
            all_hex: addresses.iter().map(|a| format!("{a:#x}")).collect(),
            used_hex: used.iter().map(|a| format!("{a:#x}")).collect(),
            used,
            more_chains: Vec::new(),
        })
    }

    /// Submitter actors a ready node lists: every submitter on every chain.
    pub(crate) fn configured_pairs(&self) -> usize {
        self.args.idle.idle_submitters * (1 + self.more_chains.len())
    }

    async fn measure(&self) -> anyhow::Result<IdlePhase> {
        let idle = &self.args.idle;
        let mut a = self.start_node("idle-a")?;
        let ready = a
            .wait_ready(
                &self.client,
                self.configured_pairs(),
                idle.idle_ready_timeout,
            )
            .await?;
        let before_work = self.sample(&a).await?;
        anvil::fund(self.anvil, &self.used).await?;
        let work_to_final_ms = self.work_until_final(&a).await?;
        let after_work = self.sample(&a).await?;
        // The first window after the work holds the leaders' idle linger
        // (`lease.idle_release_after`) and their lease releases; the next
        // one is the steady state.
        let settled = self.sample(&a).await?;
        let failover = if idle.idle_no_failover {
            None
        } else {
            Some(idle_failover::run(self, &mut a).await?)
        };
        a.kill().await;
        Ok(IdlePhase {
            chains: 1 + self.more_chains.len(),
            submitters: idle.idle_submitters,
            used: self.used.len(),
            ready,
            before_work,
            work_to_final_ms,
            after_work,
            settled,
            failover,
        })
    }

    /// Spawns a node named `node_id` with every submitter configured.
    pub(crate) fn start_node(&self, node_id: &str) -> anyhow::Result<Daemon> {
        let port = txmgr_testkit::try_free_port()?;
        let toml = self.config_toml(node_id, port);
        Daemon::spawn(&self.bin, node_id, port, &toml, &self.env, Some("warn"))
    }

    /// The node's configuration: product defaults but for rebalancing.
    pub(crate) fn config_toml(&self, node_id: &str, port: u16) -> String {
        let mut toml = format!(
            r#"node_id = "{node_id}"
[database]
url = "{db}"
migrate_on_start = false
[http]
listen = "127.0.0.1:{port}"
[node]
rebalance = false
"#,
            db = self.db.url,
        );
        if self.more_chains.is_empty() {
            toml.push_str(&format!(
                "[chain]\nrpc_url = \"{}\"\nchain_id = {CHAIN_ID}\n",
                self.anvil.rpc_url()
            ));
        } else {
            let first = (CHAIN_ID, self.anvil.rpc_url());
            for (i, (chain_id, rpc)) in std::iter::once(&first).chain(&self.more_chains).enumerate()
            {
                toml.push_str(&format!(
                    "[chains.c{i}]\nrpc_url = \"{rpc}\"\nchain_id = {chain_id}\n"
                ));
            }
        }
        for (i, address) in self.all_hex.iter().enumerate() {
            toml.push_str(&format!(
                "[submitters.\"{address}\"]\nsigner = {{ kind = \"env\", env = \"{}\" }}\n",
                key_var(i)
            ));
        }
        toml
    }

    /// The effective configuration of the generated file.
    pub(crate) fn config(&self) -> anyhow::Result<Config> {
        Config::from_toml_str(
            &self.config_toml("idle-check", 1),
            std::iter::empty::<(String, String)>(),
        )
        .map_err(|e| anyhow::anyhow!("generated idle config invalid:\n{e}"))
    }

    /// One create per used submitter to `node`, tagged `tag`.
    pub(crate) async fn give_work(&self, node: &Daemon, tag: &str) -> anyhow::Result<()> {
        // With several chains the work goes to the first one.
        let chain_ids: &[u64] = if self.more_chains.is_empty() {
            &[]
        } else {
            &[CHAIN_ID]
        };
        let batch = CreateBatch::new(
            &node.base_url,
            &self.used,
            chain_ids,
            self.used.len(),
            tag,
            Some(TRANSFER_GAS),
        );
        let concurrency = self
            .args
            .concurrency
            .max(self.used.len().min(MAX_WORK_CONCURRENCY));
        let acks = load::closed_loop(&self.client, &batch, concurrency).await;
        if let Some(first) = acks.errors.first() {
            bail!(
                "{tag}: {} of {} creates failed; first: {first}",
                acks.errors.len(),
                acks.latencies.len()
            );
        }
        Ok(())
    }

    /// Gives each used submitter one intent and mines a block every 250 ms
    /// until all of them are CONFIRMED; returns first POST → all final.
    async fn work_until_final(&self, node: &Daemon) -> anyhow::Result<f64> {
        let started = Instant::now();
        let before = load::count_in_states(self.db, &self.used_hex, &["CONFIRMED"]).await?;
        self.give_work(node, "idle-work").await?;
        let target = before + self.used.len();
        let deadline = started + self.args.tracking_timeout.max(MIN_FINAL_TIMEOUT);
        loop {
            self.anvil.try_rpc("evm_mine", json!([])).await?;
            if load::count_in_states(self.db, &self.used_hex, &["CONFIRMED"]).await? >= target {
                return Ok(millis(started.elapsed()));
            }
            if Instant::now() >= deadline {
                bail!(
                    "idle work: not all {target} intents CONFIRMED in time; states now: {:?}",
                    load::state_breakdown(self.db, &self.used_hex).await
                );
            }
            tokio::time::sleep(MINE_EVERY).await;
        }
    }

    /// One idle window: RSS, database transactions, CPU and chain calls of
    /// `node`, after checking that none of its submitters has open work.
    async fn sample(&self, node: &Daemon) -> anyhow::Result<IdleSample> {
        let open_intents = load::count_in_states(self.db, &self.all_hex, &OPEN_STATES).await?;
        anyhow::ensure!(open_intents == 0, "not idle: {open_intents} open intents");
        let rss_start = node.rss_kib().context("reading the node's VmRSS")?;
        let cpu_start = node.cpu_seconds().context("reading the node's CPU")?;
        let pg_start = CpuSample::take(&[], Some(self.db)).await;
        let calls_start = node.chain_calls(&self.client).await?;
        let db_start = self.db.transactions().await?;
        let started = Instant::now();
        tokio::time::sleep(self.args.idle.idle_window).await;
        let db_end = self.db.transactions().await?;
        let elapsed = started.elapsed().as_secs_f64();
        let calls_end = node.chain_calls(&self.client).await?;
        let pg = CpuSample::take(&[], Some(self.db))
            .await
            .since(&pg_start, 1);
        let cpu_end = node.cpu_seconds().context("reading the node's CPU")?;
        let rss = node.rss_kib().context("reading the node's VmRSS")?;
        Ok(IdleSample {
            window_s: elapsed,
            open_intents,
            rss_start_mib: rss_start as f64 / 1024.0,
            rss_mib: rss as f64 / 1024.0,
            db_transactions_per_s: (db_end - db_start) as f64 / elapsed,
            cpu_percent: (cpu_end - cpu_start) / elapsed * 100.0,
            // `since(…, 1)` gives milliseconds for the whole window.
            postgres_cpu_percent: pg.postgres_ms_per_tx / 1000.0 / elapsed * 100.0,
            chain_calls_per_s: (calls_end - calls_start) / elapsed,
        })
    }
}

/// The variable holding idle submitter `i`'s key.
fn key_var(i: usize) -> String {
    format!("IDLE_KEY_{i}")
}
