//! A chain client that injects faults into `eth_sendRawTransaction`, to
//! stop a node exactly between two steps of the pipeline.

use std::sync::{
    atomic::{AtomicU8, AtomicUsize, Ordering},
    Arc,
};

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use txmgr_actors::{
    chain::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote, FinalityTag},
    domain::Intent,
};

/// What `send_raw` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum SendFault {
    /// Forward normally.
    None = 0,
    /// Never send, never answer (the node "dies" before the broadcast).
    HangBeforeSend = 1,
    /// Send to the chain, then never answer (dies before recording it).
    HangAfterSend = 2,
    /// Wait for [`FaultyChain::open_gate`], then forward.
    Gated = 3,
}

/// Wraps a real client; `send_raw` obeys the current [`SendFault`].
#[derive(Debug)]
pub(crate) struct FaultyChain {
    inner: Arc<dyn ChainClient>,
    fault: AtomicU8,
    gate: tokio::sync::Semaphore,
    /// Calls of `send_raw` that reached the fault point.
    pub(crate) sends: AtomicUsize,
    calls: std::sync::Mutex<std::collections::BTreeMap<&'static str, usize>>,
}

impl FaultyChain {
    pub(crate) fn new(inner: Arc<dyn ChainClient>, fault: SendFault) -> Arc<FaultyChain> {
        Arc::new(FaultyChain {
            inner,
            fault: AtomicU8::new(fault as u8),
            gate: tokio::sync::Semaphore::new(0),
            sends: AtomicUsize::new(0),
            calls: Default::default(),
        })
    }

    /// RPC calls made so far, by method.
    pub(crate) fn calls(&self) -> std::collections::BTreeMap<&'static str, usize> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, method: &'static str) {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(method).or_default() += 1;
        }
    }

    /// Lets every gated send through.
    pub(crate) fn open_gate(&self) {
        self.gate
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

#[async_trait]
impl ChainClient for FaultyChain {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        self.count("eth_chainId");
        self.inner.chain_id().await
    }
    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        self.count("eth_getTransactionCount");
        self.inner.nonces(address).await
    }
    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        self.count("eth_getBalance");
        self.inner.balance(address).await
    }
    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        self.count("eth_estimateGas");
        self.inner.estimate_gas(from, intent).await
    }
    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        self.count("fees");
        self.inner.fees().await
    }
    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.sends.fetch_add(1, Ordering::SeqCst);
        self.count("eth_sendRawTransaction");
        match self.fault.load(Ordering::SeqCst) {
            1 => std::future::pending().await,
            2 => {
                let _ = self.inner.send_raw(raw).await;
                std::future::pending().await
            }
            3 => {
                let _permit = self.gate.acquire().await;
                self.inner.send_raw(raw).await
            }
            _ => self.inner.send_raw(raw).await,
        }
    }
    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.count("eth_sendRawTransaction_private");
        self.inner.send_raw_private(raw).await
    }
    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.count("eth_getTransactionReceipt");
        self.inner.receipt(hash).await
    }
    async fn block_number(&self) -> Result<u64, ChainError> {
        self.count("eth_blockNumber");
        self.inner.block_number().await
    }
    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        self.count("eth_getBlockByNumber");
        self.inner.block(number).await
    }
    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        self.count("eth_getBlockReceipts");
        self.inner.block_receipts(hash).await
    }
    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        self.count("eth_getBlockByNumber(tag)");
        self.inner.tagged_block_number(tag).await
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
