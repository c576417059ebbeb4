//! A [`ChainClient`] wrapper that counts the engine's chain calls and the
//! time spent in them, so a phase can report RPC cost per intent without
//! touching engine code. Two relaxed atomic adds per call: negligible next
//! to a loopback HTTP round trip.

use std::{
    fmt,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use serde::Serialize;
use txmgr_actors::{
    chain::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote, FinalityTag},
    domain::Intent,
};

/// The port's methods, with how many JSON-RPC requests each makes in
/// `EvmRpc` (the multi-request ones run their requests concurrently).
const METHODS: [(&str, u64); METHOD_COUNT] = [
    ("chain_id", 1),
    ("nonces", 2),
    ("estimate_gas", 1),
    ("fees", 3),
    ("send_raw", 1),
    ("receipt", 1),
    ("block_number", 1),
    ("block", 1),
    ("block_receipts", 1),
    ("tagged_block", 1),
    ("send_raw_batch", 1),
];

/// Methods of the chain port.
const METHOD_COUNT: usize = 11;

/// Counters per method, indexed like [`METHODS`].
#[derive(Default)]
pub(crate) struct ChainStats {
    calls: [AtomicU64; METHOD_COUNT],
    nanos: [AtomicU64; METHOD_COUNT],
}

impl ChainStats {
    /// The counters now.
    pub(crate) fn snapshot(&self) -> ChainSnapshot {
        ChainSnapshot {
            calls: std::array::from_fn(|i| self.calls[i].load(Ordering::Relaxed)),
            nanos: std::array::from_fn(|i| self.nanos[i].load(Ordering::Relaxed)),
        }
    }

    fn record(&self, method: usize, started: Instant) {
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.calls[method].fetch_add(1, Ordering::Relaxed);
        self.nanos[method].fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Counters at one moment; two of them give a phase's cost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChainSnapshot {
    calls: [u64; METHOD_COUNT],
    nanos: [u64; METHOD_COUNT],
}

/// One method's cost over a phase.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MethodCost {
    /// Port method name.
    pub(crate) method: &'static str,
    /// Calls of the method.
    pub(crate) calls: u64,
    /// Calls per intent.
    pub(crate) per_intent: f64,
    /// JSON-RPC requests per intent.
    pub(crate) rpc_per_intent: f64,
    /// Mean wall time of one call, in milliseconds.
    pub(crate) mean_ms: f64,
}

impl ChainSnapshot {
    /// Cost between `before` and `self`, per intent of `intents`.
    pub(crate) fn since(&self, before: &ChainSnapshot, intents: usize) -> Vec<MethodCost> {
        let intents = intents.max(1) as f64;
        METHODS
            .iter()
            .enumerate()
            .filter_map(|(i, (method, requests))| {
                let calls = self.calls[i].saturating_sub(before.calls[i]);
                let nanos = self.nanos[i].saturating_sub(before.nanos[i]);
                (calls > 0).then(|| MethodCost {
                    method,
                    calls,
                    per_intent: calls as f64 / intents,
                    rpc_per_intent: (calls * requests) as f64 / intents,
                    mean_ms: nanos as f64 / calls as f64 / 1e6,
                })
            })
            .collect()
    }
}

/// The engine's chain client, counted.
pub(crate) struct CountingChain {
    /// The real client.
    pub(crate) inner: Arc<dyn ChainClient>,
    /// Shared with the bench, which reads it between phases.
    pub(crate) stats: Arc<ChainStats>,
}

impl fmt::Debug for CountingChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingChain")
            .field("inner", &self.inner)
            .finish()
    }
}

#[async_trait]
impl ChainClient for CountingChain {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        let t = Instant::now();
        let r = self.inner.chain_id().await;
        self.stats.record(0, t);
        r
    }

    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        let t = Instant::now();
        let r = self.inner.balance(address).await;
        self.stats.record(1, t);
        r
    }

    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        let t = Instant::now();
        let r = self.inner.nonces(address).await;
        self.stats.record(1, t);
        r
    }

    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        let t = Instant::now();
        let r = self.inner.estimate_gas(from, intent).await;
        self.stats.record(2, t);
        r
    }

    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        let t = Instant::now();
        let r = self.inner.fees().await;
        self.stats.record(3, t);
        r
    }

    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        let t = Instant::now();
        let r = self.inner.send_raw(raw).await;
        self.stats.record(4, t);
        r
    }

    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        let t = Instant::now();
        let r = self.inner.send_raw_private(raw).await;
        self.stats.record(4, t);
        r
    }

    fn sends_in_batches(&self) -> bool {
        self.inner.sends_in_batches()
    }

    async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        let t = Instant::now();
        let r = self.inner.send_raw_batch(raws).await;
        self.stats.record(10, t);
        r
    }

    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        let t = Instant::now();
        let r = self.inner.receipt(hash).await;
        self.stats.record(5, t);
        r
    }

    async fn block_number(&self) -> Result<u64, ChainError> {
        let t = Instant::now();
        let r = self.inner.block_number().await;
        self.stats.record(6, t);
        r
    }

    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        let t = Instant::now();
        let r = self.inner.block(number).await;
        self.stats.record(7, t);
        r
    }

    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        let t = Instant::now();
        let r = self.inner.block_receipts(hash).await;
        self.stats.record(8, t);
        r
    }

    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        let t = Instant::now();
        let r = self.inner.tagged_block_number(tag).await;
        self.stats.record(9, t);
        r
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
