//! The bench's private anvil: started with `--no-mining` on a free loopback
//! port, killed when dropped, plus the few cheat calls the bench needs.
//!
//! `--no-mining` keeps every sent transaction pending, so a phase measures
//! acceptance by the node (`eth_sendRawTransaction` answered) and nothing
//! else: no block production competes for the two cores.

use std::{path::PathBuf, process::Stdio, time::Duration};

use alloy::{
    primitives::Address,
    providers::{Provider, RootProvider},
};
use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// Chain id of the bench anvil (anvil's default).
pub(crate) const CHAIN_ID: u64 = 31337;

/// Balance given to every bench key: far more than N transfers cost.
const FUNDING_WEI: &str = "0x3635c9adc5dea00000000";

/// How long anvil may take to answer after spawning.
const STARTUP_DEADLINE: Duration = Duration::from_secs(20);

/// Bound on one cheat call, so a wedged anvil fails the bench.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// Another process may take the probed port before anvil binds it.
const SPAWN_ATTEMPTS: usize = 5;

/// A running anvil; SIGKILLed on drop.
pub(crate) struct Anvil {
    /// HTTP JSON-RPC endpoint.
    pub(crate) url: String,
    /// Owning the child keeps anvil alive; `kill_on_drop` ends it.
    child: Child,
    /// Client for the cheat calls (not used for timed sends).
    provider: RootProvider,
}

impl Anvil {
    /// Starts `anvil --no-mining` from `ANVIL_BIN` or `.tools/bin/anvil`.
    pub(crate) async fn start() -> anyhow::Result<Anvil> {
        let bin = anvil_bin();
        let mut last_error = anyhow::anyhow!("not tried");
        for _ in 0..SPAWN_ATTEMPTS {
            match Anvil::try_spawn(&bin).await {
                Ok(anvil) => return Ok(anvil),
                Err(e) => last_error = e,
            }
        }
        Err(last_error.context(format!(
            "anvil ({}) did not start; run scripts/install-anvil.sh or set ANVIL_BIN",
            bin.display()
        )))
    }

    async fn try_spawn(bin: &PathBuf) -> anyhow::Result<Anvil> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("probing a free port")?
            .port();
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--chain-id",
                &CHAIN_ID.to_string(),
                "--silent",
                "--no-mining",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        let url = format!("http://127.0.0.1:{port}");
        let provider = RootProvider::new_http(url.parse().context("anvil url")?);
        let mut anvil = Anvil {
            url,
            child,
            provider,
        };
        anvil.wait_ready().await?;
        Ok(anvil)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("anvil exited with {status}");
            }
            if let Ok(id) = self.rpc("eth_chainId", json!([])).await {
                if id == json!(format!("{CHAIN_ID:#x}")) {
                    return Ok(());
                }
                bail!("{} answered chain id {id}", self.url);
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("no answer on {} within {STARTUP_DEADLINE:?}", self.url);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Process id, for CPU accounting.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Calls a JSON-RPC method with a JSON array of params.
    pub(crate) async fn rpc(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let call = self
            .provider
            .raw_request::<Value, Value>(method.to_owned().into(), params);
        tokio::time::timeout(RPC_TIMEOUT, call)
            .await
            .with_context(|| format!("{method} timed out"))?
            .with_context(|| format!("{method} failed"))
    }

    /// Gives every address a large balance (`anvil_setBalance`).
    pub(crate) async fn fund(&self, addresses: &[Address]) -> anyhow::Result<()> {
        for address in addresses {
            self.rpc("anvil_setBalance", json!([address, FUNDING_WEI]))
                .await?;
        }
        Ok(())
    }

    /// Empties the pool, so one phase's pending transactions do not slow
    /// the next phase's sends.
    pub(crate) async fn drop_all_transactions(&self) -> anyhow::Result<()> {
        self.rpc("anvil_dropAllTransactions", json!([])).await?;
        Ok(())
    }

    /// `(max_fee_per_gas, max_priority_fee_per_gas)` priced like the engine
    /// prices an intent without fees: `2 × base_fee + priority`.
    pub(crate) async fn eip1559_fees(&self) -> anyhow::Result<(u128, u128)> {
        let block = self
            .provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .context("eth_getBlockByNumber")?
            .context("no latest block")?;
        let base = u128::from(block.header.base_fee_per_gas.unwrap_or(0));
        let priority = self
            .provider
            .get_max_priority_fee_per_gas()
            .await
            .context("eth_maxPriorityFeePerGas")?;
        Ok((base * 2 + priority, priority))
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// `ANVIL_BIN`, else `.tools/bin/anvil` under the workspace root.
fn anvil_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ANVIL_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/anvil")
}
