//! Phase "signers": signing latency and throughput per key, by signer kind —
//! an env key in this process next to a key in SoftHSM2 over PKCS#11 (a
//! token made for the run in a temporary directory) and a key in KMS (a
//! LocalStack started for the run, on loopback). Each signer signs `--signer-count` EIP-1559
//! transfers one at a time (latency), then as many again with
//! `--signer-concurrency` in flight (throughput; the KMS signer's own bound
//! is set to the same value).

use std::time::{Duration, Instant};

use alloy::{
    consensus::{TxEip1559, TypedTransaction},
    primitives::{Address, TxKind, U256},
    signers::aws::{
        aws_config::{self, BehaviorVersion, Region},
        aws_sdk_kms::{
            self,
            types::{KeySpec, KeyUsageType},
        },
        AwsSigner,
    },
};
use anyhow::Context;
use futures::{stream, StreamExt};
use serde::Serialize;
use txmgr_actors::signer::{build_signer, Pkcs11Spec, SignerSpec, TxSigner};
use txmgr_testkit::{LocalStack, SoftHsm, SOFTHSM_MODULE};

use crate::report::LatencyStats;

/// The variable holding the env signer's key (set by `main` before the
/// runtime starts).
pub(crate) const ENV_KEY_VAR: &str = "TXMGR_BENCH_SIGNER_KEY";
/// anvil's first dev key: the env signer's key.
pub(crate) const ENV_KEY: &str =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const ENV_ADDRESS: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
const REGION: &str = "us-east-1";

/// One signer's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SignerRow {
    /// `env`, `pkcs11` or `aws_kms`.
    pub(crate) kind: &'static str,
    /// Signatures per measurement.
    pub(crate) count: usize,
    /// One at a time.
    pub(crate) latency: LatencyStats,
    /// Signatures per second one at a time.
    pub(crate) sequential_per_s: f64,
    /// Signatures per second with `concurrency` in flight.
    pub(crate) concurrent_per_s: f64,
    /// In flight for `concurrent_per_s`.
    pub(crate) concurrency: usize,
}

/// What the phase measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SignerPhase {
    /// One row per signer kind.
    pub(crate) rows: Vec<SignerRow>,
}

impl SignerPhase {
    /// Prints the phase.
    pub(crate) fn print(&self) {
        println!(
            "\nsigners (one key each; pkcs11 = SoftHSM2; KMS = LocalStack on loopback)\n{:<10} {:>6} {:>9} {:>9} {:>9} {:>11} {:>14}",
            "kind", "n", "p50 ms", "p99 ms", "max ms", "seq sig/s", "concurrent/s"
        );
        for row in &self.rows {
            println!(
                "{:<10} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>11.0} {:>9.0} (c={})",
                row.kind,
                row.count,
                row.latency.p50_ms,
                row.latency.p99_ms,
                row.latency.max_ms,
                row.sequential_per_s,
                row.concurrent_per_s,
                row.concurrency
            );
        }
    }
}

fn transfer(nonce: u64) -> TypedTransaction {
    TypedTransaction::Eip1559(TxEip1559 {
        chain_id: 31337,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(Address::repeat_byte(0x11)),
        value: U256::from(1),
        ..Default::default()
    })
}

async fn measure(
    signer: &dyn TxSigner,
    kind: &'static str,
    count: usize,
    concurrency: usize,
) -> anyhow::Result<SignerRow> {
    let mut samples = Vec::with_capacity(count);
    let started = Instant::now();
    for nonce in 0..count {
        let one = Instant::now();
        signer
            .sign(transfer(nonce as u64))
            .await
            .with_context(|| format!("{kind} signing"))?;
        samples.push(one.elapsed());
    }
    let sequential = started.elapsed();
    let started = Instant::now();
    let results: Vec<_> = stream::iter(0..count)
        .map(|nonce| signer.sign(transfer(nonce as u64)))
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let concurrent = started.elapsed();
    for result in results {
        result.with_context(|| format!("{kind} signing (concurrent)"))?;
    }
    let rate = |elapsed: Duration| count as f64 / elapsed.as_secs_f64().max(1e-9);
    Ok(SignerRow {
        kind,
        count,
        latency: LatencyStats::from_samples(samples),
        sequential_per_s: rate(sequential),
        concurrent_per_s: rate(concurrent),
        concurrency,
    })
}

/// Runs the phase. AWS credentials must be in the environment (`main` sets
/// LocalStack's test ones when none are).
pub(crate) async fn run(count: usize, concurrency: usize) -> anyhow::Result<SignerPhase> {
    let timeout = Duration::from_secs(10);
    let env_spec = SignerSpec::env(ENV_KEY_VAR);
    let env_signer = build_signer(&env_spec, ENV_ADDRESS.parse()?, 31337, timeout).await?;
    let env_row = measure(env_signer.as_ref(), "env", count, concurrency).await?;

    let (hsm, hsm_address) = bench_token()?;
    let pkcs11_spec = SignerSpec::Pkcs11(Pkcs11Spec {
        module: SOFTHSM_MODULE.into(),
        token_label: HSM_TOKEN.to_owned(),
        key_label: Some(HSM_KEY.to_owned()),
        key_id: None,
        pin_file: Some(hsm.pin_file.clone()),
        pin_env: None,
        max_sessions: concurrency,
    });
    let pkcs11_signer = build_signer(&pkcs11_spec, hsm_address, 31337, timeout).await?;
    let pkcs11_row = measure(pkcs11_signer.as_ref(), "pkcs11", count, concurrency).await?;

    let localstack = LocalStack::try_start().await?;
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(localstack.endpoint_url())
        .load()
        .await;
    let client = aws_sdk_kms::Client::new(&config);
    let created = client
        .create_key()
        .key_spec(KeySpec::EccSecgP256K1)
        .key_usage(KeyUsageType::SignVerify)
        .send()
        .await
        .context("creating a KMS key")?;
    let key_id = created
        .key_metadata()
        .map(|m| m.key_id().to_owned())
        .context("no key id")?;
    let address = alloy::signers::Signer::address(
        &AwsSigner::new(client, key_id.clone(), None)
            .await
            .context("KMS public key")?,
    );
    let kms_spec = SignerSpec::AwsKms {
        key_id,
        region: REGION.to_owned(),
        endpoint_url: Some(localstack.endpoint_url()),
        ca_file: None,
        max_concurrency: concurrency,
    };
    let kms_signer = build_signer(&kms_spec, address, 31337, timeout).await?;
    let kms_row = measure(kms_signer.as_ref(), "aws_kms", count, concurrency).await?;
    Ok(SignerPhase {
        rows: vec![env_row, pkcs11_row, kms_row],
    })
}

pub(crate) const HSM_TOKEN: &str = "bench";
pub(crate) const HSM_KEY: &str = "bench-key";

/// A SoftHSM2 installation made for the run with the token [`HSM_TOKEN`]
/// and one secp256k1 key [`HSM_KEY`], and the key's address;
/// `SOFTHSM2_CONF` points at it (before the module is loaded in this
/// process).
pub(crate) fn bench_token() -> anyhow::Result<(SoftHsm, Address)> {
    let hsm =
        SoftHsm::try_new(HSM_TOKEN).context("a SoftHSM2 token (Debian softhsm2 and opensc)")?;
    let address = hsm.try_keygen(HSM_TOKEN, HSM_KEY, "01")?;
    std::env::set_var("SOFTHSM2_CONF", &hsm.conf);
    Ok((hsm, address))
}
