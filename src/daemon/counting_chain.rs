//! A [`ChainClient`] decorator that counts every chain call of this
//! process in `txmgr_rpc_calls_total{chain, method, result}`, and the
//! failed ones for the ops page's history.

use std::sync::Arc;

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use txmgr_actors::{
    chain::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote, FinalityTag},
    domain::Intent,
    metrics::RPC_CALLS,
};

/// Chain calls that failed in this process (the ops page's history).
static RPC_ERRORS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Chain calls that failed in this process so far.
pub(super) fn rpc_errors_total() -> u64 {
    RPC_ERRORS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts every chain call in `txmgr_rpc_calls_total{chain, method, result}`.
#[derive(Debug)]
pub struct CountingChain {
    chain: Arc<str>,
    inner: Arc<dyn ChainClient>,
}

impl CountingChain {
    /// Wraps the client of the chain named `chain`.
    pub fn wrap(chain: &str, inner: Arc<dyn ChainClient>) -> Arc<dyn ChainClient> {
        Arc::new(CountingChain {
            chain: chain.into(),
            inner,
        })
    }

    fn counted<T>(
        &self,
        method: &'static str,
        result: Result<T, ChainError>,
    ) -> Result<T, ChainError> {
        let label = if result.is_ok() { "ok" } else { "error" };
        if result.is_err() {
            RPC_ERRORS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        metrics::counter!(RPC_CALLS, "chain" => self.chain.to_string(), "method" => method, "result" => label)
            .increment(1);
        result
    }
}

#[async_trait]
impl ChainClient for CountingChain {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        self.counted("eth_chainId", self.inner.chain_id().await)
    }
    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        self.counted("eth_getTransactionCount", self.inner.nonces(address).await)
    }
    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        self.counted("eth_getBalance", self.inner.balance(address).await)
    }
    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        self.counted(
            "eth_estimateGas",
            self.inner.estimate_gas(from, intent).await,
        )
    }
    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        self.counted("fees", self.inner.fees().await)
    }
    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.counted("eth_sendRawTransaction", self.inner.send_raw(raw).await)
    }
    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        let sent = self.inner.send_raw_private(raw).await;
        self.counted("eth_sendRawTransaction_private", sent)
    }
    fn sends_in_batches(&self) -> bool {
        self.inner.sends_in_batches()
    }
    async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        let answers = self.inner.send_raw_batch(raws).await?;
        Some(
            answers
                .into_iter()
                .map(|sent| self.counted("eth_sendRawTransaction", sent))
                .collect(),
        )
    }
    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.counted("eth_getTransactionReceipt", self.inner.receipt(hash).await)
    }
    async fn block_number(&self) -> Result<u64, ChainError> {
        self.counted("eth_blockNumber", self.inner.block_number().await)
    }
    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        self.counted("eth_getBlockByNumber", self.inner.block(number).await)
    }
    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        self.counted(
            "eth_getBlockReceipts",
            self.inner.block_receipts(hash).await,
        )
    }
    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        self.counted(
            "eth_getBlockByNumber_tag",
            self.inner.tagged_block_number(tag).await,
        )
    }
    fn endpoint_status(&self) -> Vec<txmgr_actors::chain::EndpointStatus> {
        self.inner.endpoint_status()
    }
    fn ws_targets(
        &self,
    ) -> Option<tokio::sync::watch::Receiver<Option<txmgr_actors::chain::WsTarget>>> {
        self.inner.ws_targets()
    }
}
