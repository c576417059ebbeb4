//! A real `txmgr run` process for the idle phase: spawned with its own
//! configuration file and a clean environment (only the signer keys), read
//! from outside — HTTP probes, `/proc/<pid>`, `/metrics` — and SIGKILLed.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use serde::Serialize;
use tokio::process::{Child, Command};

use crate::{cpu::process_cpu, raw::millis};

/// How often start-up probes ask.
const PROBE_POLL: Duration = Duration::from_millis(50);

/// Bytes of the daemon's log quoted when it fails.
const LOG_TAIL_BYTES: u64 = 4096;

/// When a started daemon became usable, in milliseconds from its spawn.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReadyTimes {
    /// First HTTP answer of any status (`/readyz`).
    pub(crate) http_ms: f64,
    /// First `/readyz` 200: database reachable and migrated, RPC healthy.
    pub(crate) readyz_ms: f64,
    /// `/readyz` 200 and `GET /v1/ops/actors` lists every configured
    /// submitter with the supervisor alive: the node accepts work for any
    /// of them. This is "ready".
    pub(crate) ready_ms: f64,
}

/// One daemon process.
pub(crate) struct Daemon {
    /// Its `node_id`.
    pub(crate) node_id: String,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base_url: String,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    spawned_at: Instant,
    /// Bearer tokens when the daemon has `[[auth.tokens]]`.
    tokens: Option<DaemonTokens>,
}

/// The bearer tokens of a daemon with authentication on: the creates go
/// with a client token, the bench's own reads (`/v1/ops/actors`,
/// `/metrics`) with an ops token, as a deployment would split them.
#[derive(Debug, Clone)]
pub(crate) struct DaemonTokens {
    /// Role `client`, no allow-list: every create.
    pub(crate) client: String,
    /// Role `ops`, no allow-list: start-up probes and `/metrics`.
    pub(crate) ops: String,
}

impl DaemonTokens {
    /// Two fresh random tokens.
    pub(crate) fn new() -> DaemonTokens {
        DaemonTokens {
            client: txmgr::http::auth::new_token(),
            ops: txmgr::http::auth::new_token(),
        }
    }

    /// Their `[[auth.tokens]]` entries (hashes only).
    pub(crate) fn toml(&self) -> String {
        format!(
            "{}{}",
            txmgr::http::auth::token_entry_toml("bench-client", "client", &self.client),
            txmgr::http::auth::token_entry_toml("bench-ops", "ops", &self.ops)
        )
    }
}

impl Daemon {
    /// Writes `toml` next to the log in the temp directory and starts
    /// `bin run` with only `env` (plus `PATH`, and `RUST_LOG` = `log_filter` when
    /// given; without, the shipped default) in its environment, so no
    /// `TXMGR_*` variable of the caller changes its configuration.
    pub(crate) fn spawn(
        bin: &Path,
        node_id: &str,
        port: u16,
        toml: &str,
        env: &[(String, String)],
        log_filter: Option<&str>,
    ) -> anyhow::Result<Daemon> {
        let stem = format!(
            "txmgr-bench-{node_id}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let config = std::env::temp_dir().join(format!("{stem}.toml"));
        let log = std::env::temp_dir().join(format!("{stem}.log"));
        std::fs::write(&config, toml).with_context(|| format!("writing {}", config.display()))?;
        let log_file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut command = Command::new(bin);
        command
            .args(["run", "--config"])
            .arg(&config)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true);
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        if let Some(filter) = log_filter {
            command.env("RUST_LOG", filter);
        }
        let spawned_at = Instant::now();
        let child = command
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        Ok(Daemon {
            node_id: node_id.to_owned(),
            base_url: format!("http://127.0.0.1:{port}"),
            config,
            log,
            child: Some(child),
            spawned_at,
            tokens: None,
        })
    }

    /// Sends the bench's requests with `tokens` (the daemon's configuration
    /// holds their hashes).
    pub(crate) fn with_tokens(mut self, tokens: Option<DaemonTokens>) -> Daemon {
        self.tokens = tokens;
        self
    }

    /// The token creates carry, when authentication is on.
    pub(crate) fn client_token(&self) -> Option<&str> {
        self.tokens.as_ref().map(|t| t.client.as_str())
    }

    /// `request` with the ops token, when authentication is on.
    fn as_ops(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.tokens {
            Some(tokens) => request.bearer_auth(&tokens.ops),
            None => request,
        }
    }

    /// Process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Waits until ready (see [`ReadyTimes::ready_ms`]) with `submitters`
    /// submitter actors listed (one per chain and submitter); fails at
    /// `timeout` or when the process exits.
    pub(crate) async fn wait_ready(
        &mut self,
        client: &reqwest::Client,
        submitters: usize,
        timeout: Duration,
    ) -> anyhow::Result<ReadyTimes> {
        let deadline = self.spawned_at + timeout;
        let (mut http, mut readyz) = (None, None);
        loop {
            self.ensure_running()?;
            if Instant::now() >= deadline {
                bail!(
                    "node {} not ready within {timeout:?}; log tail:\n{}",
                    self.node_id,
                    self.log_tail()
                );
            }
            let probe = client.get(format!("{}/readyz", self.base_url)).send().await;
            if let Ok(answer) = probe {
                http.get_or_insert_with(|| self.spawned_at.elapsed());
                if answer.status().is_success() {
                    readyz.get_or_insert_with(|| self.spawned_at.elapsed());
                }
            }
            if let (Some(http), Some(readyz)) = (http, readyz) {
                if self.knows_all(client, submitters).await {
                    return Ok(ReadyTimes {
                        http_ms: millis(http),
                        readyz_ms: millis(readyz),
                        ready_ms: millis(self.spawned_at.elapsed()),
                    });
                }
            }
            tokio::time::sleep(PROBE_POLL).await;
        }
    }

    /// The ops view lists `submitters` submitter actors and every chain's
    /// supervisor alive.
    async fn knows_all(&self, client: &reqwest::Client, submitters: usize) -> bool {
        let Ok(answer) = self
            .as_ops(client.get(format!("{}/v1/ops/actors", self.base_url)))
            .send()
            .await
        else {
            return false;
        };
        let Ok(view) = answer.json::<serde_json::Value>().await else {
            return false;
        };
        let chains = view["chains"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        !chains.is_empty()
            && chains
                .iter()
                .all(|chain| chain["supervisor_alive"].as_bool() == Some(true))
            && view["submitters"].as_array().map(Vec::len) == Some(submitters)
    }

    fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                bail!(
                    "node {} exited with {status}; log tail:\n{}",
                    self.node_id,
                    self.log_tail()
                );
            }
        }
        Ok(())
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
    }

    /// CPU seconds used so far (user + system).
    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        process_cpu(&self.pid()?.to_string())
    }

    /// Chain-port calls made so far: the sum of `txmgr_rpc_calls_total`.
    pub(crate) async fn chain_calls(&self, client: &reqwest::Client) -> anyhow::Result<f64> {
        self.metric_sum(client, "txmgr_rpc_calls_total").await
    }

    /// JSON-RPC requests sent so far (a batch is one): the sum of
    /// `txmgr_rpc_endpoint_calls_total`.
    pub(crate) async fn rpc_requests(&self, client: &reqwest::Client) -> anyhow::Result<f64> {
        self.metric_sum(client, "txmgr_rpc_endpoint_calls_total")
            .await
    }

    /// The sum of every series of the counter `name` on `/metrics` (with
    /// labels or without).
    pub(crate) async fn metric_sum(
        &self,
        client: &reqwest::Client,
        name: &str,
    ) -> anyhow::Result<f64> {
        let text = self
            .as_ops(client.get(format!("{}/metrics", self.base_url)))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .context("GET /metrics")?
            .text()
            .await
            .context("reading /metrics")?;
        let (labelled, bare) = (format!("{name}{{"), format!("{name} "));
        Ok(text
            .lines()
            .filter(|line| line.starts_with(&labelled) || line.starts_with(&bare))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// SIGKILL, and wait for the process to be gone.
    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.ok();
        }
    }

    fn log_tail(&self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(&self.log) else {
            return String::new();
        };
        let len = file.metadata().map_or(0, |m| m.len());
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
        let mut tail = String::new();
        let _ = file.read_to_string(&mut tail);
        tail
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_file(&self.config);
        let _ = std::fs::remove_file(&self.log);
    }
}

/// `--txmgr`, else `txmgr` next to this binary.
pub(crate) fn txmgr_bin(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let bin = match flag {
        Some(path) => path.to_path_buf(),
        None => std::env::current_exe()
            .context("locating this binary")?
            .with_file_name("txmgr"),
    };
    anyhow::ensure!(
        bin.exists(),
        "{} not found: cargo build --release --workspace --bins, or pass --txmgr",
        bin.display()
    );
    Ok(bin)
}
