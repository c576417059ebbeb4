//! A signer whose key never leaves a hardware security module, reached
//! through the vendor's PKCS#11 library (README "Keys in an HSM").
//!
//! ```text
//! connect: load + C_Initialize the module once per process (with its
//!          session pool) ─► a session on the token + C_Login(user)
//!          ─► private key by label/id ─► public key's CKA_EC_PARAMS
//!          (secp256k1?) and CKA_EC_POINT ─► address
//! sign:    bind chain id ─► the module's permit (≤ max_sessions, shared by
//!          every key on it) ─► an idle logged-in session of the token (or
//!          a new one) ─► C_Sign(CKM_ECDSA, hash) on the blocking pool
//!          ─► r ‖ s, low s, recovery id found by recovery ─► recovered == address?
//! ```
//!
//! A module or token fault (token removed, device error, a session the
//! module closed) is [`SignerError::Unavailable`]: the token's idle
//! sessions are dropped, the intent waits and is signed again later with
//! the same nonce, on a new session. A PIN the token refuses is
//! [`SignerError::Config`]. The PIN is never logged, shown or put in an
//! error.

use std::{fmt, path::PathBuf, sync::Arc, time::Duration};

use alloy::{
    consensus::{SignableTransaction, TxEnvelope, TypedTransaction},
    eips::eip2718::Encodable2718,
    primitives::{keccak256, Address},
};
use async_trait::async_trait;
use cryptoki::{mechanism::Mechanism, types::AuthPin};

use super::{bind_chain_id, SignedRaw, SignerError, TxSigner};

mod ecdsa;
mod module;
mod pool;
mod token;

use token::Token;

/// Where the key is: the module, the token and the key's label or id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pkcs11Key {
    /// Path of the PKCS#11 library.
    pub module: PathBuf,
    /// Label of the token.
    pub token_label: String,
    /// `CKA_LABEL` of the key's objects.
    pub key_label: Option<String>,
    /// `CKA_ID` of the key's objects.
    pub key_id: Option<Vec<u8>>,
}

impl Pkcs11Key {
    /// `token "hot" key "submitter-1"`, for messages.
    fn name(&self) -> String {
        let mut name = format!("token {:?}", self.token_label);
        if let Some(label) = &self.key_label {
            name.push_str(&format!(" key {label:?}"));
        }
        if let Some(id) = &self.key_id {
            name.push_str(&format!(" key id {}", alloy::hex::encode(id)));
        }
        name
    }
}

/// A signer for one submitter backed by one key of one token.
pub struct Pkcs11TxSigner {
    token: Arc<Token>,
    address: Address,
    chain_id: u64,
    /// How long a module call may take before the intent waits (the call
    /// itself goes on and keeps its session until the module answers).
    timeout: Duration,
}

impl Pkcs11TxSigner {
    /// Loads the module (once per process, with a pool of at most
    /// `max_sessions` sessions shared by every key on it), finds the token
    /// and the key, logs in and derives the key's address from its public
    /// point. Every call to the module is bounded by `timeout`
    /// (`chain.rpc_timeout`).
    pub async fn connect(
        key: Pkcs11Key,
        pin: AuthPin,
        chain_id: u64,
        max_sessions: usize,
        timeout: Duration,
    ) -> Result<Self, SignerError> {
        let token = Arc::new(Token::new(
            module::module(&key.module, max_sessions)?,
            key,
            pin,
        ));
        let opened = token.clone();
        let address = token.blocking(timeout, move || opened.address()).await?;
        Ok(Self {
            token,
            address,
            chain_id,
            timeout,
        })
    }
}

#[async_trait]
impl TxSigner for Pkcs11TxSigner {
    fn address(&self) -> Address {
        self.address
    }

    fn kind(&self) -> &'static str {
        "pkcs11"
    }

    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        let tx = bind_chain_id(tx, self.chain_id)?;
        let hash = tx.signature_hash();
        let token = self.token.clone();
        let raw = self
            .token
            .blocking(self.timeout, move || {
                token.with_session("signing", |session, key| {
                    session.sign(&Mechanism::Ecdsa, key, hash.as_slice())
                })
            })
            .await?;
        let signature = ecdsa::recoverable(&raw, &hash, self.address).ok_or_else(|| {
            SignerError::Refused(format!(
                "PKCS#11 {}: the module's signature does not recover to {}",
                self.token.name(),
                self.address
            ))
        })?;
        let envelope = TxEnvelope::from((tx, signature));
        let raw = envelope.encoded_2718();
        Ok(SignedRaw {
            hash: keccak256(&raw),
            raw: raw.into(),
        })
    }
}

impl fmt::Debug for Pkcs11TxSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11TxSigner")
            .field("kind", &"pkcs11")
            .field("module", &self.token.key().module)
            .field("key", &self.token.name())
            .field("address", &self.address)
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}
