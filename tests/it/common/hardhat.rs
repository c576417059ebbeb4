//! A private Hardhat node per test (npm `hardhat@2`, the EDR engine) on a free
//! loopback port, killed when dropped: the second client the core scenarios
//! run against, with its own error texts and pool rules.
//!
//! `scripts/install-hardhat.sh` installs it into `.tools/hardhat`; the node is
//! configured by `tests/hardhat/hardhat.config.js` (chain id 31337, the same
//! dev accounts as anvil) and started from the installation folder, since
//! Hardhat refuses to run from a folder that does not hold it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use alloy::providers::RootProvider;
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::dev_chain::{call, Mining};
use super::{free_port, CHAIN_ID};

/// How long Hardhat may take to answer `eth_chainId` after spawning: loading
/// it takes a few seconds of CPU, more on a busy 2-core machine.
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

/// Spawn attempts: another process may grab the port between our probe bind
/// and Hardhat's bind.
const SPAWN_ATTEMPTS: usize = 3;

/// The environment variable the config file reads the mining mode from.
const MINING_VAR: &str = "TXMGR_HARDHAT_MINING";

/// The environment variable the config file reads the chain id from.
const CHAIN_ID_VAR: &str = "TXMGR_HARDHAT_CHAIN_ID";

/// A running Hardhat node; killed (SIGKILL) on drop.
pub(crate) struct Hardhat {
    /// Loopback port the node listens on.
    pub(crate) port: u16,
    /// Owning the child keeps the node alive; `kill_on_drop` ends it.
    child: Child,
    /// Raw JSON-RPC client for the `hardhat_*` / `evm_*` cheat methods.
    provider: RootProvider,
    /// The node's stderr, shown when it fails to start.
    log_path: PathBuf,
    /// The chain id it serves.
    chain_id: u64,
}

impl Hardhat {
    /// Starts a node with `mining` (see `tests/hardhat/hardhat.config.js`).
    pub(crate) async fn start(mining: Mining) -> Hardhat {
        Hardhat::start_on_chain(mining, CHAIN_ID).await
    }

    /// Starts a node serving `chain_id` (tests of several chains).
    pub(crate) async fn start_on_chain(mining: Mining, chain_id: u64) -> Hardhat {
        let dir = hardhat_dir();
        let mut last_error = String::new();
        for _ in 0..SPAWN_ATTEMPTS {
            match Hardhat::try_spawn(&dir, mining, chain_id).await {
                Ok(node) => return node,
                Err(e) => last_error = e,
            }
        }
        panic!(
            "hardhat ({}) did not start after {SPAWN_ATTEMPTS} attempts: {last_error}",
            dir.display()
        )
    }

    async fn try_spawn(dir: &Path, mining: Mining, chain_id: u64) -> Result<Hardhat, String> {
        let port = free_port();
        let log_path = std::env::temp_dir().join(format!(
            "txmgr-hardhat-{port}-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let bin = dir.join("node_modules/.bin/hardhat");
        let child = Command::new(&bin)
            .current_dir(dir)
            .arg("--config")
            .arg(config_path())
            .args([
                "node",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .env(MINING_VAR, mining_spec(mining))
            .env(CHAIN_ID_VAR, chain_id.to_string())
            .env("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true")
            .stdin(Stdio::null())
            // stdout logs every request; errors go to stderr.
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "spawning {}: {e} (run scripts/install-hardhat.sh or set TXMGR_HARDHAT_DIR)",
                    bin.display()
                )
            })?;
        let url = format!("http://127.0.0.1:{port}");
        let provider = RootProvider::new_http(url.parse().map_err(|e| format!("{url}: {e}"))?);
        let mut node = Hardhat {
            port,
            child,
            provider,
            log_path,
            chain_id,
        };
        node.wait_ready().await?;
        Ok(node)
    }

    /// Polls `eth_chainId` until the node answers, it exits, or the deadline.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("hardhat exited with {status}: {}", self.log()));
            }
            if let Ok(chain_id) = self.try_rpc("eth_chainId", Value::Array(vec![])).await {
                if chain_id == format!("{:#x}", self.chain_id) {
                    return Ok(());
                }
                return Err(format!("port {} answered chain id {chain_id}", self.port));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no answer on port {} within {STARTUP_DEADLINE:?}: {}",
                    self.port,
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// HTTP JSON-RPC endpoint of this node.
    pub(crate) fn rpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Calls `method` with `params` (a JSON array); the error as text.
    pub(crate) async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        call(&self.provider, method, params).await
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Hardhat {
    fn drop(&mut self) {
        // Killing eagerly frees the port and the memory (a node holds a few
        // hundred MB) before the next test needs them.
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log_path);
    }
}

/// The value of `TXMGR_HARDHAT_MINING` for `mining`.
fn mining_spec(mining: Mining) -> String {
    match mining {
        Mining::Auto => "auto".to_owned(),
        Mining::Manual => "manual".to_owned(),
        Mining::Interval(every) => format!("interval:{}", every.as_millis().max(1)),
    }
}

/// `TXMGR_HARDHAT_DIR`, else `.tools/hardhat` of the workspace root: the
/// folder whose `node_modules` holds hardhat.
pub(crate) fn hardhat_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TXMGR_HARDHAT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    workspace_root().join(".tools/hardhat")
}

/// `tests/hardhat/hardhat.config.js` of the workspace root.
fn config_path() -> PathBuf {
    workspace_root().join("tests/hardhat/hardhat.config.js")
}

/// This crate's manifest dir or its parent, whichever holds the test config,
/// so member crates can share the harness.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [manifest.clone(), manifest.join("..")]
        .into_iter()
        .find(|dir| dir.join("tests/hardhat/hardhat.config.js").exists())
        .unwrap_or(manifest)
}
