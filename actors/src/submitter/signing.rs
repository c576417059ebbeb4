//! Pricing and signing a batch of allocated intents (no database access).

use futures::future::join_all;
use uuid::Uuid;

use super::{fees, SubmitterContext};
use crate::{
    chain::{ChainError, FeeQuote},
    domain::{AttemptKind, Intent},
    signer::SignedRaw,
    store::pipeline::NewAttempt,
};

/// The attempt row of a signed transaction: what is persisted before it
/// is broadcast (originals here, replacements in the resubmit pass).
pub(crate) fn attempt_row(
    tx_id: Uuid,
    nonce: u64,
    raw: SignedRaw,
    fees: &fees::Fees,
    gas_limit: u64,
    kind: AttemptKind,
    private: bool,
) -> NewAttempt {
    let (max_fee_per_gas, max_priority_fee_per_gas, gas_price) = fees.columns();
    NewAttempt {
        tx_id,
        nonce,
        tx_hash: raw.hash,
        raw: raw.raw,
        max_fee_per_gas,
        max_priority_fee_per_gas,
        gas_price,
        gas_limit,
        kind,
        private,
    }
}

/// The result of signing a batch.
#[derive(Debug, Default)]
pub(crate) struct Signed {
    /// Signed attempts, to persist before broadcast.
    pub(crate) attempts: Vec<NewAttempt>,
    /// Intents the signer definitively refused: rejected, nonce released.
    pub(crate) refused: Vec<(Uuid, String)>,
    /// Some could not be signed now (signer or RPC unavailable): they stay
    /// ALLOCATED without an attempt and are signed again later.
    pub(crate) transient_failure: bool,
    /// Why, when the signer was the one unavailable (for the ops view).
    pub(crate) signer_unavailable: Option<String>,
}

impl Signed {
    /// Puts the new attempts in the receipt index (after they are persisted,
    /// before they are broadcast).
    pub(crate) fn track(&self, ctx: &SubmitterContext) {
        for attempt in &self.attempts {
            super::tracking_reports::track(ctx, attempt.tx_id, attempt.tx_hash);
        }
    }
}

/// Prices and signs allocated intents concurrently. Intents without a gas
/// limit (recovered after a crash) are estimated again.
pub(crate) async fn sign_all(
    ctx: &SubmitterContext,
    prepared: &[(Uuid, u64, Intent)],
    quote: &FeeQuote,
) -> Signed {
    let settings = ctx.settings();
    let ids: Vec<Uuid> = prepared.iter().map(|(id, _, _)| *id).collect();
    let traces = crate::store::trace_context::parents(&ctx.pool, &ids).await;
    let results = join_all(prepared.iter().map(|(tx_id, nonce, intent)| {
        let settings = &settings;
        let traces = &traces;
        async move {
            let estimate = match intent.gas_limit {
                Some(_) => None,
                None => Some(ctx.chain.estimate_gas(ctx.key.address, intent).await?),
            };
            let gas = fees::gas_limit(intent, estimate, settings.gas_limit_margin);
            // Priced within the caps, and within the policy's
            // max_fee_per_tx at this gas limit.
            let fees = fees::price(intent, quote, &settings.for_gas_limit(gas));
            let unsigned = fees::build(intent, ctx.key.chain_id.get(), *nonce, gas, fees);
            let started = std::time::SystemTime::now();
            let result = ctx.signer.sign(unsigned).await;
            if let Some(parent) = traces.get(tx_id) {
                record_signing(ctx, parent, started, *nonce, &result);
            }
            Ok::<_, ChainError>((*tx_id, *nonce, gas, fees, intent.private, result))
        }
    }))
    .await;
    let mut signed = Signed::default();
    for result in results {
        let (tx_id, nonce, gas_limit, fee, private, result) = match result {
            Ok(parts) => parts,
            Err(err) => {
                tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, error = %err, "re-estimating gas failed");
                signed.transient_failure = true;
                continue;
            }
        };
        match result {
            Ok(raw) => {
                signed.attempts.push(attempt_row(
                    tx_id,
                    nonce,
                    raw,
                    &fee,
                    gas_limit,
                    AttemptKind::Original,
                    private,
                ));
            }
            Err(err) if err.is_transient() => {
                tracing::warn!(target: "txmgr::submitter", submitter = %ctx.key, %tx_id, error = %err, "signer unavailable");
                signed.transient_failure = true;
                signed.signer_unavailable = Some(err.to_string());
            }
            Err(err) => signed
                .refused
                .push((tx_id, format!("signer refused: {err}"))),
        }
    }
    signed
}

/// One `txmgr.sign` span: the signer's kind (never its key or URL) and the
/// attempt's hash when it signed.
fn record_signing(
    ctx: &SubmitterContext,
    parent: &crate::intent_trace::TraceParent,
    started: std::time::SystemTime,
    nonce: u64,
    result: &Result<SignedRaw, crate::signer::SignerError>,
) {
    let mut attributes = vec![
        opentelemetry::KeyValue::new("txmgr.signer", ctx.signer.kind()),
        opentelemetry::KeyValue::new("txmgr.nonce", nonce as i64),
    ];
    if let Ok(raw) = result {
        attributes.push(opentelemetry::KeyValue::new(
            "txmgr.tx_hash",
            raw.hash.to_string(),
        ));
    }
    crate::intent_trace::record(
        "txmgr.sign",
        parent,
        started,
        std::time::SystemTime::now(),
        attributes,
        result.as_ref().err().map(|e| e.to_string()),
    );
}
