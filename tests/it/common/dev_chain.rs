//! One face for the two development nodes the core scenarios run against:
//! anvil ([`Anvil`]) and Hardhat's node ([`Hardhat`], the EDR engine). Their
//! error texts and pool rules differ; their cheat methods differ only in the
//! prefix (`anvil_*` / `hardhat_*`). A scenario written once as
//! `async fn scenario(client: Client)` starts `DevChain::start(client, mining)`
//! and is wrapped by one `#[tokio::test]` per client.

use std::time::Duration;

use alloy::providers::{Provider, RootProvider};
use serde_json::{json, Value};

use super::{hardhat::Hardhat, Anvil};

/// Bound on a single JSON-RPC call, so a wedged node fails the test instead
/// of hanging it.
const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// Which development node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// Foundry's anvil.
    Anvil,
    /// Hardhat's node (EDR).
    Hardhat,
}

/// When the node mines blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mining {
    /// A block per transaction. Hardhat then refuses a gapped nonce
    /// ("Nonce too high ... can't be queued when automining").
    Auto,
    /// A block every interval; transactions wait in the pool.
    Interval(Duration),
    /// Blocks only on [`DevNode::mine`] / [`DevNode::mine_blocks`].
    Manual,
}

/// JSON-RPC access and the cheat methods both nodes have.
pub(crate) trait DevNode: Sync {
    /// Which node this is.
    fn client(&self) -> Client;

    /// HTTP JSON-RPC endpoint.
    fn rpc_url(&self) -> String;

    /// Calls `method` with `params` (a JSON array); the error as text.
    async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String>;

    /// Like [`DevNode::try_rpc`]; panics on an error.
    async fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params)
            .await
            .unwrap_or_else(|e| panic!("{:?} {method} failed: {e}", self.client()))
    }

    /// Calls the node's own cheat method `<anvil|hardhat>_<name>`.
    async fn cheat(&self, name: &str, params: Value) -> Value {
        let prefix = match self.client() {
            Client::Anvil => "anvil",
            Client::Hardhat => "hardhat",
        };
        self.rpc(&format!("{prefix}_{name}"), params).await
    }

    /// Mines one block (`evm_mine`).
    async fn mine(&self) {
        self.rpc("evm_mine", json!([])).await;
    }

    /// Mines `blocks` blocks.
    async fn mine_blocks(&self, blocks: u64) {
        match self.client() {
            Client::Anvil => {
                self.cheat("mine", json!([format!("{blocks:#x}")])).await;
            }
            // `hardhat_mine` only reserves the blocks between the first and
            // the last: they answer with parentHash 0x00…, a chain that never
            // links up, and a head follower sees a reorg on every poll.
            Client::Hardhat => {
                for _ in 0..blocks {
                    self.mine().await;
                }
            }
        }
    }

    /// Sets an account's balance in wei.
    async fn set_balance(&self, address: &str, wei: u128) {
        self.cheat("setBalance", json!([address, format!("{wei:#x}")]))
            .await;
    }

    /// Removes a transaction from the pool.
    async fn drop_transaction(&self, hash: &str) {
        self.cheat("dropTransaction", json!([hash])).await;
    }

    /// Sets the next block's base fee in wei.
    async fn set_next_base_fee(&self, wei: u128) {
        self.cheat("setNextBlockBaseFeePerGas", json!([format!("{wei:#x}")]))
            .await;
    }
}

impl DevNode for Anvil {
    fn client(&self) -> Client {
        Client::Anvil
    }

    fn rpc_url(&self) -> String {
        Anvil::rpc_url(self)
    }

    async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        Anvil::try_rpc(self, method, params)
            .await
            .map_err(|e| e.to_string())
    }
}

impl DevNode for Hardhat {
    fn client(&self) -> Client {
        Client::Hardhat
    }

    fn rpc_url(&self) -> String {
        Hardhat::rpc_url(self)
    }

    async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        Hardhat::try_rpc(self, method, params).await
    }
}

/// A running anvil or Hardhat node.
pub(crate) enum DevChain {
    /// Foundry's anvil.
    Anvil(Anvil),
    /// Hardhat's node.
    Hardhat(Hardhat),
}

impl DevChain {
    /// Starts `client` with chain id 31337, the dev accounts and `mining`.
    pub(crate) async fn start(client: Client, mining: Mining) -> DevChain {
        match client {
            Client::Anvil => {
                let block_time;
                let args: Vec<&str> = match mining {
                    Mining::Auto => vec![],
                    Mining::Manual => vec!["--no-mining"],
                    Mining::Interval(every) => {
                        block_time = every.as_secs_f64().to_string();
                        vec!["--block-time", &block_time]
                    }
                };
                DevChain::Anvil(Anvil::start_with(&args).await)
            }
            Client::Hardhat => DevChain::Hardhat(Hardhat::start(mining).await),
        }
    }
}

impl DevNode for DevChain {
    fn client(&self) -> Client {
        match self {
            DevChain::Anvil(_) => Client::Anvil,
            DevChain::Hardhat(_) => Client::Hardhat,
        }
    }

    fn rpc_url(&self) -> String {
        match self {
            DevChain::Anvil(anvil) => anvil.rpc_url(),
            DevChain::Hardhat(hardhat) => hardhat.rpc_url(),
        }
    }

    async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        match self {
            DevChain::Anvil(anvil) => DevNode::try_rpc(anvil, method, params).await,
            DevChain::Hardhat(hardhat) => hardhat.try_rpc(method, params).await,
        }
    }
}

/// One JSON-RPC call bounded by [`RPC_TIMEOUT`]; the error as text.
pub(crate) async fn call(
    provider: &RootProvider,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request = provider.raw_request::<Value, Value>(method.to_owned().into(), params);
    match tokio::time::timeout(RPC_TIMEOUT, request).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("{method} timed out after {RPC_TIMEOUT:?}")),
    }
}
