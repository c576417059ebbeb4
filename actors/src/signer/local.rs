//! Signers holding the private key in this process: from an environment
//! variable or from an encrypted JSON keystore.

use std::{fmt, path::PathBuf};

use alloy::{
    consensus::{SignableTransaction, TxEnvelope, TypedTransaction},
    eips::eip2718::Encodable2718,
    primitives::{keccak256, Address, B256},
    signers::local::{LocalSignerError, PrivateKeySigner},
};
use async_trait::async_trait;

use super::{bind_chain_id, secp_key::SecpKey, SignedRaw, SignerError, TxSigner, TARGET};

/// A signer whose secp256k1 key lives in this process.
pub struct LocalTxSigner {
    /// The key as alloy holds it (its address); `PrivateKeySigner`'s own
    /// Debug is never used.
    key: PrivateKeySigner,
    /// The same key for libsecp256k1, which signs.
    secp: SecpKey,
    /// Chain every signed transaction is bound to (EIP-155 / typed chain id).
    chain_id: u64,
    /// Where the key came from, for Debug and logs.
    source: KeySource,
}

/// Where a [`LocalTxSigner`]'s key was loaded from (names, never content).
enum KeySource {
    /// Environment variable name.
    Env(String),
    /// Key file path.
    File(PathBuf),
    /// Keystore file path.
    Keystore(PathBuf),
}

impl LocalTxSigner {
    /// Reads a hex private key (`0x` optional, surrounding whitespace
    /// ignored) from the environment variable `var`.
    ///
    /// Errors name the variable, never its value.
    pub fn from_env(var: &str, chain_id: u64) -> Result<Self, SignerError> {
        let value = read_env(var, "private key")?;
        let key = parse_private_key(&value);
        wipe(value);
        let key = key.map_err(|reason| {
            SignerError::Config(format!("environment variable {var} {reason}"))
        })?;
        Self::new(key, chain_id, KeySource::Env(var.to_owned()))
    }

    /// Reads a hex private key (`0x` optional, surrounding whitespace
    /// ignored) from the file at `path`.
    ///
    /// Errors name the file, never its content.
    pub fn from_key_file(path: &std::path::Path, chain_id: u64) -> Result<Self, SignerError> {
        let value = std::fs::read_to_string(path).map_err(|e| {
            SignerError::Config(format!("key_file {} cannot be read: {e}", path.display()))
        })?;
        let key = parse_private_key(&value);
        wipe(value);
        let key = key.map_err(|reason| {
            SignerError::Config(format!("key_file {} {reason}", path.display()))
        })?;
        Self::new(key, chain_id, KeySource::File(path.to_owned()))
    }

    /// Decrypts the JSON keystore at `path` with the password held in the
    /// environment variable `password_env`.
    ///
    /// scrypt makes decryption deliberately slow (up to seconds), so it runs
    /// on tokio's blocking pool instead of stalling a runtime worker.
    pub async fn from_keystore(
        path: PathBuf,
        password_env: &str,
        chain_id: u64,
    ) -> Result<Self, SignerError> {
        let password = read_env(password_env, "keystore password")?;
        let shown = path.display().to_string();
        let key_path = path.clone();
        let decrypted = tokio::task::spawn_blocking(move || {
            let result = PrivateKeySigner::decrypt_keystore(&key_path, password.as_bytes());
            wipe(password);
            result
        })
        .await
        .map_err(|e| {
            SignerError::Config(format!("decrypting keystore {shown}: task failed: {e}"))
        })?;
        let key = decrypted.map_err(|e| keystore_error(&shown, password_env, &e))?;
        tracing::debug!(target: TARGET, path = %shown, address = %key.address(), "keystore decrypted");
        Self::new(key, chain_id, KeySource::Keystore(path))
    }

    /// The signer of `key`, its libsecp256k1 copy made from the same bytes.
    fn new(key: PrivateKeySigner, chain_id: u64, source: KeySource) -> Result<Self, SignerError> {
        let mut field = key.credential().to_bytes();
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(&field);
        let secp = SecpKey::from_bytes(bytes);
        // Best effort, as `wipe`: the copies made here leave no key behind.
        field.fill(0);
        bytes.fill(0);
        std::hint::black_box((&field, &bytes));
        let secp = secp.ok_or_else(|| {
            // Unreachable: alloy checked the same range rules.
            SignerError::Config("the private key is not a valid secp256k1 key".to_owned())
        })?;
        Ok(Self {
            key,
            secp,
            chain_id,
            source,
        })
    }

    /// Signs `tx` (already bound to the chain) and encodes it.
    fn sign_now(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        let tx = bind_chain_id(tx, self.chain_id)?;
        let signature = self.secp.sign_hash(&tx.signature_hash());
        let envelope = TxEnvelope::from((tx, signature));
        let raw = envelope.encoded_2718();
        let hash: B256 = keccak256(&raw);
        Ok(SignedRaw {
            raw: raw.into(),
            hash,
        })
    }
}

#[async_trait]
impl TxSigner for LocalTxSigner {
    fn address(&self) -> Address {
        self.key.address()
    }

    fn kind(&self) -> &'static str {
        match self.source {
            KeySource::Env(_) | KeySource::File(_) => "env",
            KeySource::Keystore(_) => "keystore",
        }
    }

    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        // One ECDSA signature takes microseconds: no need for the blocking pool.
        self.sign_now(tx)
    }
}

impl fmt::Debug for LocalTxSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("LocalTxSigner");
        match &self.source {
            KeySource::Env(var) => s.field("kind", &"env").field("var", var),
            KeySource::File(path) => s.field("kind", &"env").field("key_file", path),
            KeySource::Keystore(path) => s.field("kind", &"keystore").field("path", path),
        };
        s.field("address", &self.key.address())
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}

/// Reads `var`, distinguishing unset, non-UTF-8 and empty; `what` names the
/// expected content in the message.
fn read_env(var: &str, what: &str) -> Result<String, SignerError> {
    match std::env::var(var) {
        Ok(value) if value.trim().is_empty() => Err(SignerError::Config(format!(
            "environment variable {var} (the {what}) is empty"
        ))),
        Ok(value) => Ok(value),
        Err(std::env::VarError::NotPresent) => Err(SignerError::Config(format!(
            "environment variable {var} (the {what}) is not set"
        ))),
        Err(std::env::VarError::NotUnicode(_)) => Err(SignerError::Config(format!(
            "environment variable {var} (the {what}) is not valid UTF-8"
        ))),
    }
}

/// Parses a 32-byte hex private key. The error is a fixed phrase that never
/// quotes the input (alloy's hex errors quote the offending character).
fn parse_private_key(value: &str) -> Result<PrivateKeySigner, &'static str> {
    const NOT_HEX: &str = "does not hold a private key: expected 64 hex digits, 0x optional";
    let trimmed = value.trim();
    let digits = trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
        .unwrap_or(trimmed);
    if digits.len() != 64 {
        return Err(NOT_HEX);
    }
    let bytes: [u8; 32] = alloy::primitives::hex::decode_to_array(digits).map_err(|_| NOT_HEX)?;
    PrivateKeySigner::from_bytes(&B256::from(bytes))
        .map_err(|_| "does not hold a valid secp256k1 private key (zero or out of range)")
}

/// Maps a keystore failure to a message naming the file and, for a MAC
/// mismatch, the password variable; the password itself is never known here.
fn keystore_error(path: &str, password_env: &str, e: &LocalSignerError) -> SignerError {
    let reason = match e {
        // eth-keystore is not a direct dependency, so its MAC error is
        // recognised by its fixed Display text ("Mac Mismatch").
        LocalSignerError::EthKeystoreError(inner)
            if inner.to_string().eq_ignore_ascii_case("mac mismatch") =>
        {
            format!("wrong password (from {password_env}): MAC mismatch")
        }
        LocalSignerError::IoError(io) => format!("cannot read: {io}"),
        LocalSignerError::EthKeystoreError(inner) => format!("unreadable keystore: {inner}"),
        LocalSignerError::EcdsaError(_) | LocalSignerError::HexError(_) => {
            "keystore holds an invalid private key".to_owned()
        }
        // Variants of features we do not enable; named generically.
        #[allow(unreachable_patterns)]
        _ => "keystore could not be decrypted".to_owned(),
    };
    SignerError::Config(format!("keystore {path}: {reason}"))
}

/// Best-effort overwrite of a secret string before it is freed. Not a
/// guarantee (copies may exist in the environment block or elsewhere), but
/// it keeps the value out of freed heap memory we control.
fn wipe(secret: String) {
    let mut bytes = secret.into_bytes();
    bytes.fill(0);
    std::hint::black_box(&bytes);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    const KEY: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const ADDRESS: Address =
        alloy::primitives::address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

    #[test]
    fn parses_key_with_and_without_prefix_and_whitespace() {
        for input in [KEY.to_owned(), format!("0x{KEY}"), format!(" 0X{KEY}\n")] {
            let key = parse_private_key(&input).unwrap();
            assert_eq!(key.address(), ADDRESS);
        }
    }

    #[test]
    fn bad_keys_are_rejected_without_echoing_them() {
        let bad_char = format!("{}zz", &KEY[..62]);
        let zero = "0".repeat(64);
        for input in [&KEY[..63], &bad_char, &zero, "0x", "not a key at all"] {
            assert!(parse_private_key(input).is_err(), "{input}");
        }
        // The fixed phrases cannot quote an input; check one anyway.
        let reason = parse_private_key(&bad_char).unwrap_err();
        assert!(!reason.contains(&KEY[..8]), "{reason}");
    }

    #[test]
    fn debug_shows_kind_and_address_only() {
        let signer = LocalTxSigner::new(
            parse_private_key(KEY).unwrap(),
            1,
            KeySource::Env("SOME_VAR".into()),
        )
        .unwrap();
        let shown = format!("{signer:?}");
        assert!(
            shown.contains("env") && shown.contains("SOME_VAR"),
            "{shown}"
        );
        assert!(shown
            .to_lowercase()
            .contains(&ADDRESS.to_string().to_lowercase()));
        assert!(
            !shown.contains(KEY) && !shown.contains(&KEY[..16]),
            "{shown}"
        );
    }

    #[test]
    fn signed_hash_is_keccak_of_raw() {
        let signer = LocalTxSigner::new(
            parse_private_key(KEY).unwrap(),
            31337,
            KeySource::Env("V".into()),
        )
        .unwrap();
        let tx = TypedTransaction::Legacy(alloy::consensus::TxLegacy {
            gas_limit: 21_000,
            gas_price: 1,
            ..Default::default()
        });
        let signed = signer.sign_now(tx).unwrap();
        assert_eq!(signed.hash, keccak256(&signed.raw));
    }
}
