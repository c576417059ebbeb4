//! A private anvil per test on a free loopback port, killed when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use alloy::providers::{Provider, RootProvider};
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// Chain id every test anvil runs with (anvil's default, 0x7a69).
pub(crate) const CHAIN_ID: u64 = 31337;

/// Private key of anvil's first well-known dev account (public test key).
pub(crate) const DEV_PRIVATE_KEY_0: &str =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/// Address of [`DEV_PRIVATE_KEY_0`].
pub(crate) const DEV_ADDRESS_0: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

/// How long anvil may take to answer `eth_chainId` after spawning.
const STARTUP_DEADLINE: Duration = Duration::from_secs(20);

/// Bound on a single JSON-RPC call, so a wedged anvil fails the test instead
/// of hanging it.
const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// Spawn attempts: another process may grab the port between our probe bind
/// and anvil's bind.
const SPAWN_ATTEMPTS: usize = 5;

/// A running anvil child process; killed (SIGKILL) on drop.
pub(crate) struct Anvil {
    /// Loopback port anvil listens on.
    pub(crate) port: u16,
    /// Owning the child keeps anvil alive; `kill_on_drop` ends it.
    child: Child,
    /// Raw JSON-RPC client for the `anvil_*` / `evm_*` cheat methods.
    provider: RootProvider,
    /// anvil's stderr, shown when it fails to start.
    log_path: PathBuf,
}

impl Anvil {
    /// Starts anvil with the harness defaults (automine, chain id 31337).
    pub(crate) async fn start() -> Anvil {
        Anvil::start_with(&[]).await
    }

    /// Starts anvil with extra arguments, e.g. `["--no-mining"]` or
    /// `["--block-time", "1"]`.
    pub(crate) async fn start_with(args: &[&str]) -> Anvil {
        let bin = anvil_bin();
        let mut last_error = String::new();
        for _ in 0..SPAWN_ATTEMPTS {
            match Anvil::try_spawn(&bin, args).await {
                Ok(anvil) => return anvil,
                Err(e) => last_error = e,
            }
        }
        panic!(
            "anvil ({}) did not start after {SPAWN_ATTEMPTS} attempts: {last_error}",
            bin.display()
        )
    }

    async fn try_spawn(bin: &PathBuf, args: &[&str]) -> Result<Anvil, String> {
        let port = free_port();
        let log_path = std::env::temp_dir().join(format!(
            "txmgr-anvil-{port}-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--chain-id", &CHAIN_ID.to_string(), "--silent"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "spawning {}: {e} (run scripts/install-anvil.sh or set ANVIL_BIN)",
                    bin.display()
                )
            })?;
        let url = format!("http://127.0.0.1:{port}");
        let provider = RootProvider::new_http(url.parse().map_err(|e| format!("{url}: {e}"))?);
        let mut anvil = Anvil {
            port,
            child,
            provider,
            log_path,
        };
        anvil.wait_ready().await?;
        Ok(anvil)
    }

    /// Polls `eth_chainId` until anvil answers, it exits, or the deadline.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("anvil exited with {status}: {}", self.log()));
            }
            if let Ok(chain_id) = self.try_rpc("eth_chainId", Value::Array(vec![])).await {
                if chain_id == format!("{CHAIN_ID:#x}") {
                    return Ok(());
                }
                // Someone else answers on this port: retry elsewhere.
                return Err(format!("port {} answered chain id {chain_id}", self.port));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no answer on port {} within {STARTUP_DEADLINE:?}: {}",
                    self.port,
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// HTTP JSON-RPC endpoint of this anvil.
    pub(crate) fn rpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A provider for this anvil, for tests that want typed calls.
    pub(crate) fn provider(&self) -> RootProvider {
        self.provider.clone()
    }

    /// Calls `method` with `params` (a JSON array) and returns the result;
    /// panics on an RPC error. For `anvil_*` / `evm_*` test controls.
    pub(crate) async fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params)
            .await
            .unwrap_or_else(|e| panic!("anvil {method} failed: {e}"))
    }

    /// Like [`Anvil::rpc`] but returns the error, for calls expected to fail.
    pub(crate) async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        let call = self
            .provider
            .raw_request::<Value, Value>(method.to_owned().into(), params);
        match tokio::time::timeout(RPC_TIMEOUT, call).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!("{method} timed out after {RPC_TIMEOUT:?}")),
        }
    }

    /// Mines one block (`evm_mine`), e.g. under `--no-mining`.
    pub(crate) async fn mine(&self) {
        self.rpc("evm_mine", Value::Array(vec![])).await;
    }

    /// Mines `blocks` blocks at once (`anvil_mine`).
    pub(crate) async fn mine_blocks(&self, blocks: u64) {
        self.rpc("anvil_mine", serde_json::json!([format!("{blocks:#x}")]))
            .await;
    }

    /// Current block number.
    pub(crate) async fn block_number(&self) -> u64 {
        let hex = self.rpc("eth_blockNumber", Value::Array(vec![])).await;
        parse_quantity(&hex)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        // `kill_on_drop` also covers this; killing eagerly frees the port
        // before the next test in this process needs one.
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log_path);
    }
}

/// `ANVIL_BIN`, else `.tools/bin/anvil` of the workspace root (this crate's
/// manifest dir or its parent, so member crates can share the harness).
pub(crate) fn anvil_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ANVIL_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = [manifest.clone(), manifest.join("..")];
    candidates
        .iter()
        .map(|dir| dir.join(".tools/bin/anvil"))
        .find(|bin| bin.exists())
        .unwrap_or_else(|| manifest.join(".tools/bin/anvil"))
}

/// A port that was free a moment ago; the caller retries if it is taken
/// before anvil binds it.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("binding 127.0.0.1:0 to find a free port: {e}"))
}

/// Parses a JSON-RPC hex quantity such as `"0x1a"`.
pub(crate) fn parse_quantity(value: &Value) -> u64 {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("not a hex quantity: {value}"))
}
