//! Latency and outcome of every signature, by signer kind
//! (`txmgr_signer_requests_total`, `txmgr_signer_latency_seconds`).

use std::{fmt, sync::Arc, time::Instant};

use alloy::{consensus::TypedTransaction, primitives::Address};
use async_trait::async_trait;

use super::{SignedRaw, SignerError, TxSigner};
use crate::metrics::{SIGNER_LATENCY, SIGNER_REQUESTS};

/// Wraps a signer and records each `sign` under its kind.
pub struct MeteredSigner {
    /// The `chain` label of the chain it signs for.
    chain: String,
    inner: Arc<dyn TxSigner>,
    kind: &'static str,
}

impl MeteredSigner {
    /// Records `inner`'s signatures under `kind` (`env`, `aws_kms`, …).
    pub fn new(inner: Arc<dyn TxSigner>, kind: &'static str, chain: String) -> Self {
        Self { chain, inner, kind }
    }
}

/// The `result` label of an outcome.
fn result_label(result: &Result<SignedRaw, SignerError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(SignerError::Unavailable(_)) => "unavailable",
        Err(_) => "refused",
    }
}

#[async_trait]
impl TxSigner for MeteredSigner {
    fn address(&self) -> Address {
        self.inner.address()
    }

    fn kind(&self) -> &'static str {
        self.kind
    }

    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        let started = Instant::now();
        let result = self.inner.sign(tx).await;
        metrics::histogram!(SIGNER_LATENCY, "chain" => self.chain.clone(), "kind" => self.kind)
            .record(started.elapsed().as_secs_f64());
        metrics::counter!(SIGNER_REQUESTS, "chain" => self.chain.clone(), "kind" => self.kind, "result" => result_label(&result))
            .increment(1);
        result
    }
}

impl fmt::Debug for MeteredSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
