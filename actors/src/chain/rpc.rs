//! [`EvmRpc`]: the chain port ([`ChainClient`]) over one JSON-RPC endpoint.

use std::{fmt, sync::Arc, time::Duration};

use alloy::{
    eips::BlockNumberOrTag,
    network::TransactionBuilder,
    primitives::{Address, Bytes, B256, U256},
    providers::{Provider, RootProvider},
    rpc::{
        client::RpcClient,
        types::{TransactionReceipt, TransactionRequest},
    },
    transports::{http::reqwest, RpcError, TransportErrorKind},
};
use async_trait::async_trait;

use super::{
    redact::{secret_renderings, transport_text},
    transport::{NamedHttp, MAX_RPC_RESPONSE_BYTES},
};

mod batch;
pub use batch::DEFAULT_BATCH_REFUSAL_BACKOFF;

use super::port::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote};
use crate::domain::FinalityTag;
use crate::domain::Intent;

/// [`ChainClient`] over HTTP(S) JSON-RPC with alloy, every call bounded by a
/// timeout. Known by its `name` everywhere: the URL (which often carries an
/// API key in its path or query) appears in no error, log line or Debug output.
#[derive(Clone)]
pub struct EvmRpc {
    provider: RootProvider,
    timeout: Duration,
    name: Arc<str>,
    /// Renderings of the URL (and its secret-bearing parts) that error texts
    /// from the transport may repeat; each is replaced by the name.
    secrets: Arc<[String]>,
    /// When the endpoint last refused a JSON-RPC batch: one request per
    /// transaction for `batch_refusal_backoff` after that (see `batch`).
    batch_refusal: Arc<batch::BatchRefusal>,
    batch_refusal_backoff: Duration,
}

impl fmt::Debug for EvmRpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvmRpc").field("name", &self.name).finish()
    }
}

impl EvmRpc {
    /// Prepares a client for the endpoint `name` at `url` (`http://` or
    /// `https://`, verified with `tls`); connects lazily. Errors name the
    /// endpoint, never its URL.
    pub fn new(
        name: &str,
        url: &str,
        timeout: Duration,
        tls: &Arc<rustls::ClientConfig>,
    ) -> Result<Self, ChainError> {
        let parsed: reqwest::Url = url
            .parse()
            .map_err(|e| ChainError::Transport(format!("endpoint {name}: not a valid URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ChainError::Transport(format!(
                "endpoint {name}: scheme must be http or https, not {}",
                parsed.scheme()
            )));
        }
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(rustls::ClientConfig::clone(tls))
            .connect_timeout(timeout)
            .timeout(timeout)
            // A redirect could move the call (and its API key) to another
            // host or to plain http: a 3xx is an error, never followed.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                ChainError::Transport(format!("endpoint {name}: HTTP client: {}", e.without_url()))
            })?;
        let is_local = alloy::transports::utils::guess_local_url(url);
        let client = RpcClient::new(
            NamedHttp::new(http, parsed.clone(), name, MAX_RPC_RESPONSE_BYTES),
            is_local,
        );
        Ok(Self {
            provider: RootProvider::new(client),
            timeout,
            name: Arc::from(name),
            secrets: secret_renderings(url, &parsed).into(),
            batch_refusal: Arc::default(),
            batch_refusal_backoff: batch::DEFAULT_BATCH_REFUSAL_BACKOFF,
        })
    }

    /// How long one request per transaction lasts after the endpoint
    /// refused a JSON-RPC batch, before a batch is tried again
    /// (`chain.batch_refusal_backoff`).
    pub fn with_batch_refusal_backoff(mut self, backoff: Duration) -> Self {
        self.batch_refusal_backoff = backoff;
        self
    }

    /// The endpoint's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, RpcError<TransportErrorKind>>>,
    ) -> Result<T, ChainError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(|e| self.map_error(e)),
            Err(_) => Err(ChainError::Transport(format!(
                "endpoint {}: timed out after {:?}",
                self.name, self.timeout
            ))),
        }
    }

    fn map_error(&self, err: RpcError<TransportErrorKind>) -> ChainError {
        match err {
            RpcError::ErrorResp(payload) => ChainError::Rpc {
                code: payload.code,
                message: self.scrub(payload.message.to_string()),
            },
            other => ChainError::Transport(format!(
                "endpoint {}: {}",
                self.name,
                self.scrub(transport_text(&other))
            )),
        }
    }

    /// Replaces every rendering of the URL in `text` by the endpoint name.
    fn scrub(&self, text: String) -> String {
        super::redact::scrub(text, &self.secrets, &format!("<{}>", self.name))
    }
}

/// The call an intent makes, as a transaction request (no nonce, no fees).
pub fn intent_request(from: Address, intent: &Intent) -> TransactionRequest {
    let mut request = TransactionRequest::default()
        .with_from(from)
        .with_value(intent.value)
        .with_input(intent.data.clone());
    match intent.to {
        Some(to) => request = request.with_to(to),
        None => request.set_create(),
    }
    request
}

#[async_trait]
impl ChainClient for EvmRpc {
    async fn chain_id(&self) -> Result<u64, ChainError> {
        self.bounded(self.provider.get_chain_id()).await
    }

    async fn nonces(&self, address: Address) -> Result<ChainNonces, ChainError> {
        let latest =
            self.bounded(async { self.provider.get_transaction_count(address).latest().await });
        let pending =
            self.bounded(async { self.provider.get_transaction_count(address).pending().await });
        let (latest, pending) = tokio::try_join!(latest, pending)?;
        Ok(ChainNonces { latest, pending })
    }

    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        self.bounded(async { self.provider.get_balance(address).latest().await })
            .await
    }

    async fn estimate_gas(&self, from: Address, intent: &Intent) -> Result<u64, ChainError> {
        let request = intent_request(from, intent);
        self.bounded(async { self.provider.estimate_gas(request).await })
            .await
    }

    async fn fees(&self) -> Result<FeeQuote, ChainError> {
        let block = self.bounded(async {
            self.provider
                .get_block_by_number(BlockNumberOrTag::Latest)
                .await
        });
        let priority = self.bounded(self.provider.get_max_priority_fee_per_gas());
        let gas_price = self.bounded(self.provider.get_gas_price());
        let (block, priority_fee, gas_price) = tokio::try_join!(block, priority, gas_price)?;
        let base_fee = block
            .and_then(|b| b.header.base_fee_per_gas)
            .map(u128::from)
            .unwrap_or(0);
        Ok(FeeQuote {
            base_fee,
            priority_fee,
            gas_price,
        })
    }

    async fn send_raw(&self, raw: &Bytes) -> Result<B256, ChainError> {
        let raw = raw.clone();
        self.bounded(async {
            self.provider
                .raw_request::<_, B256>("eth_sendRawTransaction".into(), (raw,))
                .await
        })
        .await
    }

    async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.bounded(async { self.provider.get_transaction_receipt(hash).await })
            .await
    }

    async fn block_number(&self) -> Result<u64, ChainError> {
        self.bounded(self.provider.get_block_number()).await
    }

    async fn block(&self, number: u64) -> Result<Option<BlockSummary>, ChainError> {
        let block = self
            .bounded(async {
                self.provider
                    .get_block_by_number(BlockNumberOrTag::Number(number))
                    .await
            })
            .await?;
        Ok(block.map(|block| BlockSummary {
            number: block.header.number,
            hash: block.header.hash,
            parent_hash: block.header.parent_hash,
            tx_hashes: block.transactions.hashes().collect(),
        }))
    }

    async fn block_receipts(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<TransactionReceipt>>, ChainError> {
        let result = self
            .bounded(async {
                self.provider
                    .raw_request::<_, Option<Vec<TransactionReceipt>>>(
                        "eth_getBlockReceipts".into(),
                        (hash,),
                    )
                    .await
            })
            .await;
        match result {
            Ok(receipts) => Ok(receipts),
            // Method not found / not supported: fall back to per-hash receipts.
            Err(ChainError::Rpc { code: -32601, .. }) => Ok(None),
            Err(ChainError::Rpc { message, .. })
                if message.to_ascii_lowercase().contains("not supported")
                    || message.to_ascii_lowercase().contains("does not exist") =>
            {
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    async fn tagged_block_number(&self, tag: FinalityTag) -> Result<Option<u64>, ChainError> {
        let tag = match tag {
            FinalityTag::Safe => BlockNumberOrTag::Safe,
            FinalityTag::Finalized => BlockNumberOrTag::Finalized,
        };
        let block = self
            .bounded(async { self.provider.get_block_by_number(tag).await })
            .await?;
        Ok(block.map(|block| block.header.number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: i64, message: &str) -> ChainError {
        ChainError::Rpc {
            code,
            message: message.to_owned(),
        }
    }

    #[test]
    fn reverts_and_halts_are_the_intents_own_failure() {
        for (code, message) in [
            (3, "execution reverted"),
            (-32603, "EVM error OpcodeNotFound"),
            (-32603, "EVM error InvalidFEOpcode"),
            (-32603, "EVM error StackUnderflow"),
            (-32000, "invalid opcode: opcode 0xc not defined"),
            (-32000, "stack underflow (0 <=> 2)"),
            (-32000, "invalid jump destination"),
            (
                -32000,
                "max initcode size exceeded: code size 60000 limit 49152",
            ),
        ] {
            assert!(rpc(code, message).is_revert(), "{message}");
        }
        for (code, message) in [
            (-32000, "insufficient funds for gas * price + value"),
            (-32000, "gas required exceeds allowance (21000)"),
            (-32603, "request timed out"),
            (-32005, "rate limited"),
        ] {
            assert!(!rpc(code, message).is_revert(), "{message}");
        }
    }
}
