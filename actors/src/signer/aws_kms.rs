//! A signer whose key never leaves AWS KMS: `kms:Sign` of the transaction's
//! digest with an `ECC_SECG_P256K1` / `SIGN_VERIFY` key (alloy's `AwsSigner`
//! on the official AWS SDK).
//!
//! ```text
//! connect: GetPublicKey ─► key spec + usage checked ─► address derived
//! sign:    bind chain id ─► permit (≤ max_concurrency per key) ─► kms:Sign(DIGEST)
//!          ─► DER → (r, low s), recovery id found by recovery ─► recovered == address?
//! ```
//!
//! Credentials come the standard AWS way (environment, shared profile,
//! instance or task role), never from txmgr's configuration. TLS follows
//! the node's one trust policy: the Mozilla roots compiled into the binary
//! (`webpki-root-certs`) plus the signer's `ca_file`, never the operating
//! system's store (the SDK's default). A throttled,
//! slow or unreachable KMS is [`SignerError::Unavailable`]: the intent waits
//! and is signed again later with the same nonce.

use std::{fmt, sync::Arc, time::Duration};

use alloy::{
    consensus::{SignableTransaction, TxEnvelope, TypedTransaction},
    eips::eip2718::Encodable2718,
    primitives::{keccak256, Address},
    signers::{
        aws::{
            aws_config::{self, timeout::TimeoutConfig, BehaviorVersion, Region},
            aws_sdk_kms::{
                self,
                error::{ProvideErrorMetadata, SdkError},
                types::{KeySpec, KeyUsageType},
            },
            AwsSigner, AwsSignerError,
        },
        Signer,
    },
};
use async_trait::async_trait;
use tokio::sync::Semaphore;

use super::{bind_chain_id, SignedRaw, SignerError, TxSigner};

/// Where a KMS key lives (names only; credentials come from the AWS chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsKey {
    /// Key id, ARN or alias (`alias/…`).
    pub key_id: String,
    /// AWS region of the key.
    pub region: String,
    /// Another endpoint than AWS's (an emulator, a VPC endpoint).
    pub endpoint_url: Option<String>,
    /// PEM of a private CA trusted for that endpoint, besides the public
    /// roots.
    pub ca_file: Option<std::path::PathBuf>,
}

/// The SDK's HTTPS client with the node's trust policy: the compiled-in
/// Mozilla roots and `ca_file`, not the operating system's store.
fn http_client(
    ca_file: Option<&std::path::Path>,
) -> Result<aws_sdk_kms::config::SharedHttpClient, SignerError> {
    use aws_smithy_http_client::{
        tls::{rustls_provider::CryptoMode, Provider, TlsContext, TrustStore},
        Builder,
    };
    use base64::Engine as _;
    let mut store = TrustStore::empty().with_native_roots(false);
    for root in webpki_root_certs::TLS_SERVER_ROOT_CERTS {
        let body = base64::engine::general_purpose::STANDARD.encode(root.as_ref());
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        store = store.with_pem_certificate(pem.into_bytes());
    }
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .map_err(|e| SignerError::Config(format!("aws_kms ca_file {}: {e}", path.display())))?;
        store = store.with_pem_certificate(pem);
    }
    let tls = TlsContext::builder()
        .with_trust_store(store)
        .build()
        .map_err(|e| SignerError::Config(format!("aws_kms TLS: {e}")))?;
    Ok(Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(tls)
        .build_https())
}

/// Error codes of KMS that say "not now" rather than "no".
const TRANSIENT_CODES: &[&str] = &[
    "ThrottlingException",
    "KMSInternalException",
    "DependencyTimeoutException",
    "KeyUnavailableException",
    "RequestLimitExceeded",
    "ServiceUnavailable",
    "InternalFailure",
];

/// A signer for one submitter backed by one KMS key.
pub struct AwsKmsTxSigner {
    inner: AwsSigner,
    key: KmsKey,
    chain_id: u64,
    /// Signing requests to KMS in flight for this key, at most.
    permits: Arc<Semaphore>,
}

impl AwsKmsTxSigner {
    /// Connects to KMS, checks that the key is a secp256k1 signing key and
    /// derives its address. `timeout` bounds every KMS request (and its
    /// connection); `max_concurrency` bounds signing requests in flight.
    pub async fn connect(
        key: &KmsKey,
        chain_id: u64,
        timeout: Duration,
        max_concurrency: usize,
    ) -> Result<Self, SignerError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(key.region.clone()))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(timeout)
                    .operation_attempt_timeout(timeout)
                    .operation_timeout(timeout.saturating_mul(3))
                    .build(),
            );
        if let Some(url) = &key.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        loader = loader.http_client(http_client(key.ca_file.as_deref())?);
        let config = loader.load().await;
        let client = aws_sdk_kms::Client::new(&config);
        let public = client
            .get_public_key()
            .key_id(&key.key_id)
            .send()
            .await
            .map_err(|e| sdk_error(&key.key_id, "GetPublicKey", e))?;
        let spec_ok = public.key_spec() == Some(&KeySpec::EccSecgP256K1);
        let usage_ok = public.key_usage() == Some(&KeyUsageType::SignVerify);
        if !spec_ok || !usage_ok {
            return Err(SignerError::Config(format!(
                "KMS key {}: key spec {} and usage {}; an Ethereum key needs ECC_SECG_P256K1 and SIGN_VERIFY",
                key.key_id,
                public.key_spec().map_or("unknown", |s| s.as_str()),
                public.key_usage().map_or("unknown", |u| u.as_str()),
            )));
        }
        let inner = AwsSigner::new(client, key.key_id.clone(), Some(chain_id))
            .await
            .map_err(|e| signer_error(&key.key_id, e))?;
        Ok(Self {
            inner,
            key: key.clone(),
            chain_id,
            permits: Arc::new(Semaphore::new(max_concurrency.max(1))),
        })
    }
}

/// Maps an SDK failure: no answer, a timeout or a "not now" code is
/// transient; anything else (access denied, unknown or disabled key) is not.
fn sdk_error<E: ProvideErrorMetadata + std::error::Error + 'static, R: fmt::Debug>(
    key_id: &str,
    operation: &str,
    err: SdkError<E, R>,
) -> SignerError {
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => service
            .err()
            .code()
            .is_some_and(|code| TRANSIENT_CODES.contains(&code)),
        _ => false,
    };
    let detail = match &err {
        SdkError::ServiceError(service) => format!(
            "{}: {}",
            service.err().code().unwrap_or("error"),
            service.err().message().unwrap_or("no message")
        ),
        SdkError::TimeoutError(_) => "timed out".to_owned(),
        SdkError::DispatchFailure(failure) => {
            if failure.is_timeout() {
                "timed out".to_owned()
            } else {
                "unreachable (connection failed)".to_owned()
            }
        }
        other => other.to_string(),
    };
    let message = format!("KMS {operation} for key {key_id}: {detail}");
    if transient {
        SignerError::Unavailable(message)
    } else {
        SignerError::Refused(message)
    }
}

/// Maps alloy's signer error (an SDK error inside, or a bad key or answer).
fn signer_error(key_id: &str, err: AwsSignerError) -> SignerError {
    match err {
        AwsSignerError::Sign(e) => sdk_error(key_id, "Sign", e),
        AwsSignerError::GetPublicKey(e) => sdk_error(key_id, "GetPublicKey", e),
        other => SignerError::Refused(format!("KMS key {key_id}: {other}")),
    }
}

#[async_trait]
impl TxSigner for AwsKmsTxSigner {
    fn address(&self) -> Address {
        Signer::address(&self.inner)
    }

    fn kind(&self) -> &'static str {
        "aws_kms"
    }

    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        let tx = bind_chain_id(tx, self.chain_id)?;
        let hash = tx.signature_hash();
        let signature = {
            // Closed only when the signer is dropped, which cannot happen
            // while `self` is borrowed.
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| SignerError::Unavailable("KMS signer closed".into()))?;
            self.inner.sign_hash(&hash).await
        };
        let signature = signature.map_err(|e| match e {
            alloy::signers::Error::Other(inner) => match inner.downcast::<AwsSignerError>() {
                Ok(aws) => signer_error(&self.key.key_id, *aws),
                Err(other) => SignerError::Refused(format!("KMS key {}: {other}", self.key.key_id)),
            },
            other => SignerError::Refused(format!("KMS key {}: {other}", self.key.key_id)),
        })?;
        // alloy normalises s and finds the recovery id by recovery; check
        // the result anyway, as for a remote signer.
        let recovered = signature
            .recover_address_from_prehash(&hash)
            .map_err(|e| SignerError::Refused(format!("KMS signature does not recover: {e}")))?;
        if recovered != self.address() {
            return Err(SignerError::WrongAddress {
                expected: self.address(),
                got: recovered,
            });
        }
        let envelope = TxEnvelope::from((tx, signature));
        let raw = envelope.encoded_2718();
        Ok(SignedRaw {
            hash: keccak256(&raw),
            raw: raw.into(),
        })
    }
}

impl fmt::Debug for AwsKmsTxSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsKmsTxSigner")
            .field("kind", &"aws_kms")
            .field("key_id", &self.key.key_id)
            .field("region", &self.key.region)
            .field("address", &self.address())
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}
