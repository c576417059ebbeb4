//! [`RpcEndpoints`] as the engine's [`ChainClient`]: every read goes through
//! the fail-over path, every send through the fan-out.

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    rpc::types::TransactionReceipt,
};
use async_trait::async_trait;
use tokio::sync::watch;

use super::{
    endpoints::{EndpointStatus, RpcEndpoints, WsTarget},
    BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote, FinalityTag,
};
use crate::domain::Intent;

#[async_trait]
impl ChainClient for RpcEndpoints {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        self.read(|rpc| async move { rpc.chain_id().await }).await
    }

    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        self.read(|rpc| async move { rpc.nonces(address).await })
            .await
    }

    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        self.read(|rpc| async move { rpc.balance(address).await })
            .await
    }

    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        self.read(|rpc| async move { rpc.estimate_gas(from, intent).await })
            .await
    }

    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        self.read(|rpc| async move { rpc.fees().await }).await
    }

    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.send(raw).await
    }

    async fn send_raw_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        self.send_private(raw).await
    }

    fn sends_in_batches(&self) -> bool {
        self.batches_sends()
    }

    async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        self.send_batch(raws).await
    }

    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.read(|rpc| async move { rpc.receipt(hash).await })
            .await
    }

    async fn block_number(&self) -> Result<u64, ChainError> {
        self.read(|rpc| async move { rpc.block_number().await })
            .await
    }

    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        self.read(|rpc| async move { rpc.block(number).await })
            .await
    }

    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        self.read(|rpc| async move { rpc.block_receipts(hash).await })
            .await
    }

    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        self.read(|rpc| async move { rpc.tagged_block_number(tag).await })
            .await
    }

    fn endpoint_status(&self) -> Vec<EndpointStatus> {
        self.status()
    }

    fn ws_targets(&self) -> Option<watch::Receiver<Option<WsTarget>>> {
        Some(RpcEndpoints::ws_targets(self))
    }
}
