//! Transaction signers: turn an unsigned transaction into the EIP-2718 bytes
//! a node accepts, for one submitter address.
//!
//! ```text
//!   SignerSpec ─► build_signer(expected address, chain id, timeout)
//!                   ├─ Env      ─► LocalTxSigner  (hex key in an env var or a key file)
//!                   ├─ Keystore ─► LocalTxSigner  (scrypt JSON, decrypted off the runtime)
//!                   ├─ Remote   ─► RemoteTxSigner (eth_signTransaction, answer verified)
//!                   └─ AwsKms   ─► AwsKmsTxSigner (kms:Sign of the digest, bounded per key)
//!                 ─► MeteredSigner (txmgr_signer_* by kind)
//!                 ─► Arc<dyn TxSigner> ─► sign(TypedTransaction) ─► SignedRaw { raw, hash }
//! ```
//!
//! Key material never leaves the signer: errors name the environment
//! variable or file, never its content, and every `Debug` shows only the
//! signer kind and address. A remote signer is not trusted: its answer is
//! decoded, its signer recovered and every field compared with the request,
//! so it cannot sign for another account or swap the transaction.
//!
//! Modules: `spec` (the configuration of a signer), `local` (env, key file
//! and keystore keys), `remote` (JSON-RPC client),
//! `verify` (checks on a remote answer), `endpoint` (URL credentials and
//! redaction), `aws_kms` (AWS KMS), `metered` (metrics of every kind).

mod aws_kms;
mod endpoint;
mod local;
mod metered;
mod pkcs11;
mod remote;
mod secp_key;
mod spec;
mod verify;

use std::{fmt, sync::Arc, time::Duration};

use alloy::{
    consensus::{SignableTransaction, Transaction, TypedTransaction},
    primitives::{Address, Bytes, B256},
};
use async_trait::async_trait;

pub use aws_kms::{AwsKmsTxSigner, KmsKey};
pub use local::LocalTxSigner;
pub use metered::MeteredSigner;
pub use pkcs11::{Pkcs11Key, Pkcs11TxSigner};
pub use remote::RemoteTxSigner;
pub use spec::{Pkcs11Spec, SignerSpec, DEFAULT_KMS_CONCURRENCY, DEFAULT_PKCS11_SESSIONS};

/// `tracing` target of everything signer related.
const TARGET: &str = "txmgr::signer";

/// A signing identity for one submitter, shared by its actor as
/// `Arc<dyn TxSigner>` (object safe on purpose: the kind is a config choice).
#[async_trait]
pub trait TxSigner: Send + Sync + fmt::Debug {
    /// The address every signature from this signer recovers to.
    fn address(&self) -> Address;

    /// The signer kind (`env`, `keystore`, `remote`, `aws_kms`), for the
    /// ops view and metric labels.
    fn kind(&self) -> &'static str;

    /// Signs an unsigned transaction and returns its EIP-2718 bytes and hash.
    ///
    /// A transaction without a chain id (legacy) gets the signer's chain id
    /// (EIP-155); one with another chain id is refused, so a transaction can
    /// never be replayed on a chain it was not meant for. EIP-4844 blob
    /// transactions are refused: txmgr never carries sidecars.
    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError>;
}

/// A signed transaction ready for `eth_sendRawTransaction`.
#[derive(Clone, PartialEq, Eq)]
pub struct SignedRaw {
    /// EIP-2718 encoding (RLP for legacy transactions): exactly the bytes to
    /// broadcast, and to re-broadcast unchanged after an unknown outcome.
    pub raw: Bytes,
    /// keccak256 of `raw`: the hash the node reports and receipts use.
    pub hash: B256,
}

impl fmt::Debug for SignedRaw {
    // The raw bytes are public once broadcast, but long; the hash identifies them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedRaw")
            .field("hash", &self.hash)
            .field("raw_len", &self.raw.len())
            .finish()
    }
}

/// Why a signer could not be built or could not sign.
///
/// Messages never contain key material or passwords; remote URLs are shown
/// with their password redacted.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The signer could not be reached or did not answer in time; the same
    /// request may succeed later.
    #[error("signer unavailable: {0}")]
    Unavailable(String),
    /// The signer answered and declined, or the request cannot be signed.
    #[error("signing refused: {0}")]
    Refused(String),
    /// The signer signs for another address than the submitter's.
    #[error("signer address {got} differs from the configured address {expected}")]
    WrongAddress {
        /// Address the submitter is configured with.
        expected: Address,
        /// Address the signer actually signs for.
        got: Address,
    },
    /// A remote signer returned a signed transaction that differs from the
    /// one requested in `field`; it was not used.
    #[error("remote signer returned a different transaction ({field} differs from the request)")]
    Tampered {
        /// First differing field, e.g. `nonce` or `to`.
        field: &'static str,
    },
    /// The signer configuration is unusable (missing variable, bad key,
    /// wrong keystore password, bad URL).
    #[error("signer configuration: {0}")]
    Config(String),
}

impl SignerError {
    /// Whether retrying the identical request later may succeed. Only
    /// `Unavailable` is transient: every other variant is a decision or a
    /// configuration problem that a retry would repeat.
    pub fn is_transient(&self) -> bool {
        match self {
            // The remote was down, slow or answered 5xx: try again later.
            Self::Unavailable(_) => true,
            // The signer (or our own checks) decided: same input, same answer.
            Self::Refused(_) => false,
            // A key/config mismatch does not heal by itself.
            Self::WrongAddress { .. } | Self::Config(_) => false,
            // A remote that swaps transactions must not be retried blindly.
            Self::Tampered { .. } => false,
        }
    }
}

/// Builds the signer described by `spec` and checks that it signs for
/// `expected`.
///
/// - `Env` / `Keystore`: the key's address must equal `expected`.
/// - `Remote`: the signer is asked for `eth_accounts`, which must list
///   `expected`. Signers that do not implement `eth_accounts` (JSON-RPC
///   "method not found") are accepted with a warning: every signature is
///   still checked to recover to `expected`, so a wrong account surfaces as
///   [`SignerError::WrongAddress`] on the first `sign`.
///
/// `timeout` bounds each remote HTTP request; it does not apply to keystore
/// decryption, which is CPU-bound and runs on the blocking pool.
pub async fn build_signer(
    spec: &SignerSpec,
    expected: Address,
    chain_id: u64,
    timeout: Duration,
) -> Result<Arc<dyn TxSigner>, SignerError> {
    let signer: Arc<dyn TxSigner> = match spec {
        SignerSpec::Env {
            env: Some(var),
            key_file: None,
        } => Arc::new(LocalTxSigner::from_env(var, chain_id)?),
        SignerSpec::Env {
            env: None,
            key_file: Some(path),
        } => Arc::new(LocalTxSigner::from_key_file(path, chain_id)?),
        SignerSpec::Env { .. } => {
            return Err(SignerError::Config(
                "an env signer names exactly one of `env` and `key_file`".into(),
            ))
        }
        SignerSpec::Keystore { path, password_env } => {
            Arc::new(LocalTxSigner::from_keystore(path.clone(), password_env, chain_id).await?)
        }
        SignerSpec::Remote { url, ca_file, .. } => {
            let tls = crate::tls::client_config(ca_file.as_deref())
                .map_err(|e| SignerError::Config(format!("remote signer ca_file: {e}")))?;
            let remote = RemoteTxSigner::new(url, expected, chain_id, timeout, &tls)?;
            remote.check_account().await?;
            Arc::new(remote)
        }
        SignerSpec::AwsKms {
            key_id,
            region,
            endpoint_url,
            ca_file,
            max_concurrency,
        } => {
            let key = KmsKey {
                key_id: key_id.clone(),
                region: region.clone(),
                endpoint_url: endpoint_url.clone(),
                ca_file: ca_file.clone(),
            };
            Arc::new(AwsKmsTxSigner::connect(&key, chain_id, timeout, *max_concurrency).await?)
        }
        SignerSpec::Pkcs11(spec) => {
            let key_id = spec
                .key_id
                .as_deref()
                .map(|id| alloy::hex::decode(id.trim()))
                .transpose()
                .map_err(|e| SignerError::Config(format!("pkcs11 key_id is not hex: {e}")))?;
            let key = Pkcs11Key {
                module: spec.module.clone(),
                token_label: spec.token_label.clone(),
                key_label: spec.key_label.clone(),
                key_id,
            };
            let pin = read_pin(spec.pin_file.as_deref(), spec.pin_env.as_deref())?;
            Arc::new(Pkcs11TxSigner::connect(key, pin, chain_id, spec.max_sessions, timeout).await?)
        }
    };
    if signer.address() != expected {
        return Err(SignerError::WrongAddress {
            expected,
            got: signer.address(),
        });
    }
    tracing::info!(target: TARGET, kind = spec.kind(), address = %expected, "signer ready");
    let chain = crate::metrics::chain_label(chain_id.into());
    Ok(Arc::new(MeteredSigner::new(signer, spec.kind(), chain)))
}

/// The user PIN of a `pkcs11` signer, from its file or its variable
/// (surrounding white space ignored); never shown in an error.
fn read_pin(
    file: Option<&std::path::Path>,
    var: Option<&str>,
) -> Result<cryptoki::types::AuthPin, SignerError> {
    let pin = match (file, var) {
        (Some(path), None) => std::fs::read_to_string(path)
            .map_err(|e| SignerError::Config(format!("pkcs11 pin_file {}: {e}", path.display())))?,
        (None, Some(var)) => std::env::var(var)
            .map_err(|_| SignerError::Config(format!("pkcs11 pin_env: {var} is not set")))?,
        _ => {
            return Err(SignerError::Config(
                "a pkcs11 signer names exactly one of `pin_file` and `pin_env`".into(),
            ))
        }
    };
    let pin = pin.trim();
    if pin.is_empty() {
        return Err(SignerError::Config("the pkcs11 PIN is empty".into()));
    }
    Ok(cryptoki::types::AuthPin::from(pin.to_owned()))
}

/// Pins the transaction to `chain_id` before signing: fills a missing
/// (legacy) chain id, refuses a different one and refuses blob transactions.
fn bind_chain_id(mut tx: TypedTransaction, chain_id: u64) -> Result<TypedTransaction, SignerError> {
    if matches!(tx, TypedTransaction::Eip4844(_)) {
        return Err(SignerError::Refused(
            "EIP-4844 blob transactions are not supported".into(),
        ));
    }
    match tx.chain_id() {
        None => tx.set_chain_id(chain_id),
        Some(c) if c == chain_id => {}
        Some(c) => {
            return Err(SignerError::Refused(format!(
                "transaction chain id {c} differs from the signer's chain id {chain_id}"
            )))
        }
    }
    Ok(tx)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use alloy::consensus::{TxEip1559, TxEip4844Variant, TxLegacy};

    #[test]
    fn legacy_without_chain_id_gets_the_signer_chain_id() {
        let tx = TypedTransaction::Legacy(TxLegacy::default());
        let bound = bind_chain_id(tx, 5).unwrap();
        assert_eq!(bound.chain_id(), Some(5));
    }

    #[test]
    fn matching_chain_id_is_kept() {
        let tx = TypedTransaction::Eip1559(TxEip1559 {
            chain_id: 7,
            ..Default::default()
        });
        assert_eq!(bind_chain_id(tx, 7).unwrap().chain_id(), Some(7));
    }

    #[test]
    fn other_chain_id_is_refused() {
        let tx = TypedTransaction::Eip1559(TxEip1559 {
            chain_id: 1,
            ..Default::default()
        });
        let err = bind_chain_id(tx, 31337).unwrap_err();
        assert!(matches!(err, SignerError::Refused(_)), "{err:?}");
        assert!(!err.is_transient());
    }

    #[test]
    fn blob_transactions_are_refused() {
        let tx = TypedTransaction::Eip4844(TxEip4844Variant::TxEip4844(Default::default()));
        assert!(matches!(bind_chain_id(tx, 1), Err(SignerError::Refused(_))));
    }

    #[test]
    fn only_unavailable_is_transient() {
        assert!(SignerError::Unavailable("x".into()).is_transient());
        assert!(!SignerError::Config("x".into()).is_transient());
        assert!(!SignerError::Tampered { field: "nonce" }.is_transient());
        let wrong = SignerError::WrongAddress {
            expected: Address::ZERO,
            got: Address::repeat_byte(1),
        };
        assert!(!wrong.is_transient());
    }
}
