//! A private anvil on a free loopback port, SIGKILLed when dropped: the one
//! launcher behind the tests, the actor tests and both benchmarks.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use alloy::providers::{Provider, RootProvider};
use serde_json::{json, Value};
use tokio::{
    process::{Child, Command},
    time::Instant,
};

use crate::{port::try_free_port, KitError};

/// Chain id every kit anvil runs with (anvil's default, 0x7a69).
pub const CHAIN_ID: u64 = 31337;

/// How long anvil may take to answer `eth_chainId` after spawning.
const STARTUP_DEADLINE: Duration = Duration::from_secs(20);

/// Spawn attempts: another process may take the probed port before anvil
/// binds it.
const SPAWN_ATTEMPTS: usize = 5;

/// How blocks are produced.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Mining {
    /// A block per transaction (anvil's default).
    #[default]
    Auto,
    /// No blocks unless asked ([`Anvil::mine`]): transactions stay pending,
    /// so a caller controls inclusion (or measures acceptance alone).
    Manual,
    /// A block every interval, whatever the pool holds.
    Interval(Duration),
}

/// How to start an anvil; `Default` is automine with a 10 s RPC bound.
#[derive(Debug, Clone)]
pub struct AnvilOptions {
    /// Block production.
    pub mining: Mining,
    /// Further anvil flags, e.g. `["--slots-in-an-epoch", "2"]`.
    pub extra_args: Vec<String>,
    /// Bound on one JSON-RPC call, so a wedged anvil fails the caller
    /// instead of hanging it.
    pub rpc_timeout: Duration,
    /// The chain id it serves ([`CHAIN_ID`] unless a test runs several
    /// chains).
    pub chain_id: u64,
}

impl Default for AnvilOptions {
    fn default() -> AnvilOptions {
        AnvilOptions {
            mining: Mining::Auto,
            extra_args: Vec::new(),
            rpc_timeout: Duration::from_secs(10),
            chain_id: CHAIN_ID,
        }
    }
}

impl AnvilOptions {
    /// The anvil flags these options stand for (host, port and chain id
    /// are the launcher's).
    fn args(&self) -> Vec<String> {
        let mut args = match self.mining {
            Mining::Auto => Vec::new(),
            Mining::Manual => vec!["--no-mining".to_owned()],
            Mining::Interval(every) => {
                vec!["--block-time".to_owned(), every.as_secs_f64().to_string()]
            }
        };
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// A running anvil child process; killed (SIGKILL) on drop.
pub struct Anvil {
    /// Loopback port anvil listens on.
    port: u16,
    /// Owning the child keeps anvil alive; `kill_on_drop` ends it.
    child: Child,
    /// Raw JSON-RPC client for the `anvil_*` / `evm_*` cheat methods.
    provider: RootProvider,
    /// Bound on one call through [`Anvil::try_rpc`].
    rpc_timeout: Duration,
    /// anvil's stderr, quoted when it fails to start.
    log_path: PathBuf,
    /// The chain id it serves.
    chain_id: u64,
}

impl Anvil {
    /// An automining anvil; panics if it does not start (tests).
    pub async fn start() -> Anvil {
        Anvil::start_with(&[]).await
    }

    /// An anvil with extra flags, e.g. `["--no-mining"]` or
    /// `["--block-time", "1"]`; panics if it does not start (tests).
    pub async fn start_with(extra_args: &[&str]) -> Anvil {
        let options = AnvilOptions {
            extra_args: extra_args.iter().map(|arg| (*arg).to_owned()).collect(),
            ..AnvilOptions::default()
        };
        Anvil::try_start(&options)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// An anvil serving `chain_id`, with extra flags; panics if it does not
    /// start (tests of several chains).
    pub async fn start_on_chain(chain_id: u64, extra_args: &[&str]) -> Anvil {
        let options = AnvilOptions {
            extra_args: extra_args.iter().map(|arg| (*arg).to_owned()).collect(),
            chain_id,
            ..AnvilOptions::default()
        };
        Anvil::try_start(&options)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Freezes anvil (SIGSTOP): its RPC stops answering, its state stays —
    /// a chain outage that [`Anvil::resume`] ends.
    pub fn pause(&self) {
        crate::signal::send(&self.child, "-STOP");
    }

    /// Lets a paused anvil run again (SIGCONT).
    pub fn resume(&self) {
        crate::signal::send(&self.child, "-CONT");
    }

    /// Starts anvil (`ANVIL_BIN`, else the workspace's `.tools/bin/anvil`)
    /// and waits until it answers with its chain id.
    pub async fn try_start(options: &AnvilOptions) -> Result<Anvil, KitError> {
        let bin = anvil_bin();
        let mut reason = String::new();
        for _ in 0..SPAWN_ATTEMPTS {
            match Anvil::try_spawn(&bin, options).await {
                Ok(anvil) => return Ok(anvil),
                // A missing binary will not appear on a retry.
                Err(e @ KitError::Spawn { .. }) => return Err(e),
                Err(e) => reason = e.to_string(),
            }
        }
        Err(KitError::NotReady { bin, reason })
    }

    async fn try_spawn(bin: &PathBuf, options: &AnvilOptions) -> Result<Anvil, KitError> {
        /// Tells apart the logs of anvils one process starts on a reused port.
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let port = try_free_port()?;
        let log_path = std::env::temp_dir().join(format!(
            "txmgr-anvil-{}-{port}-{}.log",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let log = std::fs::File::create(&log_path).map_err(|source| KitError::Spawn {
            bin: log_path.clone(),
            source,
        })?;
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--chain-id", &options.chain_id.to_string(), "--silent"])
            .args(options.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| KitError::Spawn {
                bin: bin.clone(),
                source,
            })?;
        let url = format!("http://127.0.0.1:{port}");
        let provider = RootProvider::new_http(url.parse().map_err(|e| KitError::Rpc {
            method: "connect".to_owned(),
            message: format!("{url}: {e}"),
        })?);
        let mut anvil = Anvil {
            port,
            child,
            provider,
            rpc_timeout: options.rpc_timeout,
            log_path,
            chain_id: options.chain_id,
        };
        anvil.wait_ready().await?;
        Ok(anvil)
    }

    /// Polls `eth_chainId` until anvil answers, it exits, or the deadline.
    async fn wait_ready(&mut self) -> Result<(), KitError> {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        let not_ready = |anvil: &Anvil, reason: String| KitError::NotReady {
            bin: anvil_bin(),
            reason: format!("{reason}; stderr: {}", anvil.log()),
        };
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(not_ready(self, format!("exited with {status}")));
            }
            if let Ok(chain_id) = self.try_rpc("eth_chainId", json!([])).await {
                if chain_id == format!("{:#x}", self.chain_id) {
                    return Ok(());
                }
                // Someone else answers on this port: the caller retries elsewhere.
                let reason = format!("port {} answered chain id {chain_id}", self.port);
                return Err(not_ready(self, reason));
            }
            if Instant::now() >= deadline {
                let reason = format!(
                    "no answer on port {} within {STARTUP_DEADLINE:?}",
                    self.port
                );
                return Err(not_ready(self, reason));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Loopback port anvil listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The chain id it serves.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// HTTP JSON-RPC endpoint of this anvil.
    pub fn rpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A provider for this anvil, for callers that want typed calls.
    pub fn provider(&self) -> RootProvider {
        self.provider.clone()
    }

    /// anvil's process id (for CPU accounting); `None` once it has exited.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Calls `method` with `params` (a JSON array), bounded by the RPC
    /// timeout of the options anvil was started with.
    pub async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, KitError> {
        let call = self
            .provider
            .raw_request::<Value, Value>(method.to_owned().into(), params);
        match tokio::time::timeout(self.rpc_timeout, call).await {
            Ok(result) => result.map_err(|e| KitError::Rpc {
                method: method.to_owned(),
                message: e.to_string(),
            }),
            Err(_) => Err(KitError::RpcTimeout {
                method: method.to_owned(),
                timeout: self.rpc_timeout,
            }),
        }
    }

    /// [`Anvil::try_rpc`] for tests: panics on an error.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params)
            .await
            .unwrap_or_else(|e| panic!("anvil {e}"))
    }

    /// Mines one block (`evm_mine`), e.g. under [`Mining::Manual`].
    pub async fn mine(&self) {
        self.rpc("evm_mine", json!([])).await;
    }

    /// Mines `blocks` blocks at once (`anvil_mine`).
    pub async fn mine_blocks(&self, blocks: u64) {
        self.rpc("anvil_mine", json!([format!("{blocks:#x}")]))
            .await;
    }

    /// Current block number.
    pub async fn block_number(&self) -> u64 {
        parse_quantity(&self.rpc("eth_blockNumber", json!([])).await)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        // `kill_on_drop` also covers this; killing eagerly frees the port
        // before the next user in this process needs one.
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log_path);
    }
}

/// `ANVIL_BIN`, else `.tools/bin/anvil` of the workspace root (this crate's
/// parent directory).
fn anvil_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ANVIL_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.tools/bin/anvil"))
}

/// Parses a JSON-RPC hex quantity such as `"0x1a"`; panics on anything else.
pub fn parse_quantity(value: &Value) -> u64 {
    value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("not a hex quantity: {value}"))
}
