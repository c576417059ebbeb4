//! Phase "raw": the ceiling. N EIP-1559 transfers are signed before the
//! clock starts, then sent with alloy's `eth_sendRawTransaction` at a fixed
//! concurrency over one keep-alive connection pool — the same transport the
//! engine's chain client uses.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    primitives::{Address, Bytes, TxKind, B256, U256},
    providers::{Provider, RootProvider},
    signers::{local::PrivateKeySigner, SignerSync},
};
use anyhow::Context;

use crate::{
    anvil::{self, Anvil},
    cpu::CpuSample,
    report::{LatencyStats, RawPhase},
    SINK,
};

/// Gas of a plain transfer.
const TRANSFER_GAS: u64 = 21_000;

/// Signs `count` transfers round-robin over `keys` (nonces from 0), sends
/// them at `concurrency`, and measures sends per second.
pub(crate) async fn run(
    anvil: &Anvil,
    keys: &[PrivateKeySigner],
    count: usize,
    concurrency: usize,
) -> anyhow::Result<RawPhase> {
    run_on(&[anvil], keys, count, concurrency).await
}

/// [`run`] over several anvils (one chain each): transfer `i` goes to
/// `anvils[i % A]`, so every chain gets the same share, signed by the same
/// keys with each chain's own nonces.
pub(crate) async fn run_on(
    anvils: &[&Anvil],
    keys: &[PrivateKeySigner],
    count: usize,
    concurrency: usize,
) -> anyhow::Result<RawPhase> {
    anyhow::ensure!(!anvils.is_empty(), "raw send needs at least one anvil");
    let mut chains = Vec::with_capacity(anvils.len());
    for anvil in anvils {
        let (max_fee, priority) = anvil::eip1559_fees(anvil).await?;
        chains.push((anvil.chain_id(), max_fee, priority));
    }
    let raws = Arc::new(sign_all(&chains, keys, count)?);
    let providers: Arc<Vec<RootProvider>> = Arc::new(anvils.iter().map(|a| a.provider()).collect());
    let pids: Vec<u32> = anvils.iter().filter_map(|a| a.pid()).collect();

    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = CpuSample::take(&pids, None).await;
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (raws, next, providers) = (raws.clone(), next.clone(), providers.clone());
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(raw) = raws.get(i) else {
                    return (latencies, errors);
                };
                let provider = &providers[i % providers.len()];
                let sent = Instant::now();
                let answer = provider
                    .raw_request::<_, B256>("eth_sendRawTransaction".into(), (raw,))
                    .await;
                latencies.push(sent.elapsed());
                if let Err(e) = answer {
                    errors.push(e.to_string());
                }
            }
        });
    }
    let mut latencies = Vec::with_capacity(count);
    let mut errors = Vec::new();
    while let Some(joined) = workers.join_next().await {
        let (l, e) = joined.context("raw sender task panicked")?;
        latencies.extend(l);
        errors.extend(e);
    }
    let elapsed = started.elapsed();
    let cpu = CpuSample::take(&pids, None).await.since(&cpu_before, count);
    if let Some(first) = errors.first() {
        anyhow::bail!(
            "raw send: {} of {count} sends failed; first: {first}",
            errors.len()
        );
    }
    Ok(RawPhase {
        keys: keys.len(),
        count,
        concurrency,
        elapsed_ms: millis(elapsed),
        tx_per_s: per_second(count, elapsed),
        send_latency: LatencyStats::from_samples(latencies),
        cpu,
    })
}

/// Transfer `i` goes to chain `i % C` and is signed by `keys[(i / C) % K]`
/// with nonce `i / (C × K)`; `chains` holds each chain's
/// `(chain id, max fee, priority fee)`.
fn sign_all(
    chains: &[(u64, u128, u128)],
    keys: &[PrivateKeySigner],
    count: usize,
) -> anyhow::Result<Vec<Bytes>> {
    anyhow::ensure!(!keys.is_empty(), "raw send needs at least one key");
    let sink = SINK.parse::<Address>().context("sink address")?;
    (0..count)
        .map(|i| {
            let (chain_id, max_fee, priority) = chains[i % chains.len()];
            let per_chain = i / chains.len();
            let key = &keys[per_chain % keys.len()];
            let tx = TxEip1559 {
                chain_id,
                nonce: (per_chain / keys.len()) as u64,
                gas_limit: TRANSFER_GAS,
                max_fee_per_gas: max_fee,
                max_priority_fee_per_gas: priority,
                to: TxKind::Call(sink),
                value: U256::from(1),
                access_list: Default::default(),
                input: Bytes::new(),
            };
            let signature = key
                .sign_hash_sync(&tx.signature_hash())
                .context("signing a raw transfer")?;
            let envelope = TxEnvelope::from(tx.into_signed(signature));
            Ok(Bytes::from(envelope.encoded_2718()))
        })
        .collect()
}

/// Whole milliseconds, as reported.
pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `count / elapsed`, 0 for an empty interval.
pub(crate) fn per_second(count: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}
