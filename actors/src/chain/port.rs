//! The chain port: what the engine asks of an EVM node ([`ChainClient`])
//! and the vocabulary of its answers. Kept behind a trait so state-machine
//! logic never calls the network directly and tests can inject faults; the
//! JSON-RPC implementation is [`EvmRpc`](super::EvmRpc).

use std::fmt;

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use tokio::sync::watch;

use super::endpoints::{EndpointStatus, WsTarget};
use crate::domain::{FinalityTag, Intent};

/// An error from the chain node.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChainError {
    /// The node answered with a JSON-RPC error; classify it by its text.
    #[error("rpc error {code}: {message}")]
    Rpc {
        /// JSON-RPC `error.code`.
        code: i64,
        /// JSON-RPC `error.message`.
        message: String,
    },
    /// No answer: timeout, connection failure, HTTP error, bad response.
    /// Whether a send reached the node is unknown.
    #[error("transport: {0}")]
    Transport(String),
}

impl ChainError {
    /// A call that ran the EVM and failed for the transaction's own reason
    /// (estimate/call): it reverted, or execution halted ([`HALT_TEXTS`]) —
    /// as opposed to a node or transport problem. Asking again fails the
    /// same way, so the intent cannot be sent as it is.
    pub fn is_revert(&self) -> bool {
        match self {
            ChainError::Rpc { code, message } => {
                let message = message.to_ascii_lowercase();
                *code == 3
                    || message.contains("revert")
                    || HALT_TEXTS.iter().any(|text| message.contains(text))
            }
            ChainError::Transport(_) => false,
        }
    }
}

/// How nodes report that the EVM halted running a call (not a revert):
/// anvil names revm's halt reason (`EVM error OpcodeNotFound`), geth and
/// Hardhat describe it. Only halts the code itself causes: an out-of-gas or
/// out-of-funds answer depends on the account and the fee market, not on
/// the intent alone.
const HALT_TEXTS: &[&str] = &[
    "opcodenotfound",
    "invalidfeopcode",
    "invalid opcode",
    "invalidjump",
    "invalid jump",
    "stackunderflow",
    "stack underflow",
    "stackoverflow",
    "stack limit reached",
    "createcontractsizelimit",
    "max code size exceeded",
    "createinitcodesizelimit",
    "max initcode size exceeded",
    "createcontractstartingwithef",
    "invalid code: must not begin with 0xef",
];

/// Current fee market, as the node reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeeQuote {
    /// Base fee of the latest block (EIP-1559), 0 when the chain has none.
    pub base_fee: u128,
    /// The node's suggested priority fee.
    pub priority_fee: u128,
    /// The node's suggested legacy gas price.
    pub gas_price: u128,
}

/// The nonces of an address at `latest` and `pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainNonces {
    /// Transactions of the address in mined blocks.
    pub latest: u64,
    /// Including the node's pool.
    pub pending: u64,
}

/// A block as the head watcher needs it: identity, parent and the hashes of
/// its transactions (no bodies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockSummary {
    /// Height.
    pub number: u64,
    /// Hash.
    pub hash: B256,
    /// Parent hash: a mismatch with the previous block we saw is a reorg.
    pub parent_hash: B256,
    /// Hashes of the transactions it contains.
    pub tx_hashes: Vec<B256>,
}

/// What the engine needs from a chain node.
#[async_trait]
pub trait ChainClient: Send + Sync + fmt::Debug {
    /// `eth_chainId`.
    async fn chain_id(&self) -> Result<u64, ChainError>;
    /// `eth_getTransactionCount` at latest and pending.
    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError>;
    /// `eth_getBalance` at the latest block, in wei.
    async fn balance(&self, address: Address) -> Result<U256, ChainError>;
    /// `eth_estimateGas` for the intent sent from `from`.
    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError>;
    /// Base fee, priority fee and gas price now.
    async fn fees(&self) -> Result<FeeQuote, ChainError>;
    /// `eth_sendRawTransaction`; the hash the node returned.
    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError>;
    /// True when [`ChainClient::send_raw_batch`] sends several transactions
    /// in one request (a JSON-RPC batch) rather than one by one: the
    /// broadcaster then checks its lease once for the whole batch, which
    /// one request's timeout bounds.
    fn sends_in_batches(&self) -> bool {
        false
    }
    /// `eth_sendRawTransaction` of every one of `raws` in one request, in
    /// this order; the answers come in the same order. `None` when the
    /// client sends no batches or an endpoint refused this one: send them
    /// one by one (the same bytes, so a node that took some of them answers
    /// "already known").
    async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        let _ = raws;
        None
    }
    /// `eth_sendRawTransaction` to the chain's send-only endpoints alone (a
    /// private mempool), never to a public one; any answer but an
    /// acceptance is an unknown answer ([`ChainError::Transport`]). A client
    /// without send-only endpoints answers that it has none.
    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        let _ = raw;
        Err(ChainError::Transport(
            "private send: the chain has no send_only endpoint".to_owned(),
        ))
    }
    /// `eth_getTransactionReceipt`; `None` while not mined.
    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError>;
    /// `eth_blockNumber`.
    async fn block_number(&self) -> Result<u64, ChainError>;
    /// `eth_getBlockByNumber(n, false)`; `None` above the head.
    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError>;
    /// `eth_getBlockReceipts`; `None` when the node does not support it (the
    /// caller falls back to per-hash receipts).
    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError>;
    /// Number of the `safe` / `finalized` block; `None` if the node has none.
    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError>;
    /// The configured endpoints behind this client and their health, for ops
    /// views and readiness; empty for clients that are not (test doubles).
    /// Decorators must forward it.
    fn endpoint_status(&self) -> Vec<EndpointStatus> {
        Vec::new()
    }
    /// Where `newHeads` can be subscribed to: the WebSocket URL of the
    /// endpoint chosen for reads, following its changes; `None` for clients
    /// without endpoints. Decorators must forward it.
    fn ws_targets(&self) -> Option<watch::Receiver<Option<WsTarget>>> {
        None
    }
}
