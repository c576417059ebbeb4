//! One fee quote per node per poll interval instead of one per submitter per
//! cycle: the market moves per block, not per batch.

use std::{
    fmt,
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use tokio::sync::Mutex;

use super::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote, FinalityTag};
use crate::domain::Intent;

/// How many `ttl`s a quote may be reused when a refresh fails.
const STALE_FACTOR: u32 = 10;

/// A [`ChainClient`] whose `fees()` answer is shared for `ttl` (and reused
/// up to 10 × `ttl` while refreshing fails); every other call goes straight
/// through.
pub struct FeeCache {
    inner: Arc<dyn ChainClient>,
    ttl: Duration,
    quote: Mutex<Option<(Instant, FeeQuote)>>,
}

impl fmt::Debug for FeeCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeeCache")
            .field("inner", &self.inner)
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl FeeCache {
    /// Wraps a client; quotes are reused for `ttl`.
    pub fn new(inner: Arc<dyn ChainClient>, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            quote: Mutex::new(None),
        }
    }
}

#[async_trait]
impl ChainClient for FeeCache {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        self.inner.chain_id().await
    }
    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        self.inner.nonces(address).await
    }
    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        self.inner.balance(address).await
    }
    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        self.inner.estimate_gas(from, intent).await
    }
    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        // Held across the fetch: concurrent callers wait for one request.
        let mut slot = self.quote.lock().await;
        if let Some((at, quote)) = *slot {
            if at.elapsed() < self.ttl {
                return Ok(quote);
            }
        }
        match self.inner.fees().await {
            Ok(quote) => {
                *slot = Some((Instant::now(), quote));
                Ok(quote)
            }
            // A failed refresh falls back to a recent quote (a flaky RPC
            // must not stop every cycle); an old one is not trusted.
            Err(err) => match *slot {
                Some((at, quote)) if at.elapsed() < self.ttl.saturating_mul(STALE_FACTOR) => {
                    tracing::debug!(target: "txmgr::chain", error = %err, "fee refresh failed; using the last quote");
                    Ok(quote)
                }
                _ => Err(err),
            },
        }
    }
    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.inner.send_raw(raw).await
    }
    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.inner.send_raw_private(raw).await
    }
    fn sends_in_batches(&self) -> bool {
        self.inner.sends_in_batches()
    }
    async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        self.inner.send_raw_batch(raws).await
    }
    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.inner.receipt(hash).await
    }
    async fn block_number(&self) -> Result<u64, ChainError> {
        self.inner.block_number().await
    }
    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        self.inner.block(number).await
    }
    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        self.inner.block_receipts(hash).await
    }
    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        self.inner.tagged_block_number(tag).await
    }
    fn endpoint_status(&self) -> Vec<crate::chain::EndpointStatus> {
        self.inner.endpoint_status()
    }
    fn ws_targets(&self) -> Option<tokio::sync::watch::Receiver<Option<crate::chain::WsTarget>>> {
        self.inner.ws_targets()
    }
}
