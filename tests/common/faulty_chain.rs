//! A chain client that injects faults into `eth_sendRawTransaction`, to
//! stop a node exactly between two steps of the pipeline.

use std::sync::{
    atomic::{AtomicU8, AtomicUsize, Ordering},
    Arc,
};

use alloy::{
    primitives::{Address, Bytes, B256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use txmgr_actors::{
    chain::{ChainClient, ChainError, ChainNonces, FeeQuote},
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
    hang_fees: std::sync::atomic::AtomicBool,
    gate: tokio::sync::Semaphore,
    /// Calls of `send_raw` that reached the fault point.
    pub(crate) sends: AtomicUsize,
}

impl FaultyChain {
    pub(crate) fn new(inner: Arc<dyn ChainClient>, fault: SendFault) -> Arc<FaultyChain> {
        Arc::new(FaultyChain {
            inner,
            fault: AtomicU8::new(fault as u8),
            hang_fees: std::sync::atomic::AtomicBool::new(false),
            gate: tokio::sync::Semaphore::new(0),
            sends: AtomicUsize::new(0),
        })
    }

    pub(crate) fn set(&self, fault: SendFault) {
        self.fault.store(fault as u8, Ordering::SeqCst);
    }

    /// Makes `fees` (asked right after nonces are allocated, before
    /// signing) never answer: a crash between allocation and persisting.
    pub(crate) fn hang_fees(&self, hang: bool) {
        self.hang_fees.store(hang, Ordering::SeqCst);
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
        self.inner.chain_id().await
    }
    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        self.inner.nonces(address).await
    }
    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        self.inner.estimate_gas(from, intent).await
    }
    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        if self.hang_fees.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.fees().await
    }
    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.sends.fetch_add(1, Ordering::SeqCst);
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
    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.inner.receipt(hash).await
    }
}
