//! Where a submitter's key lives — the one description of a signer, read
//! from `config.toml` (`signer = { kind = "…", … }`) and built by
//! [`super::build_signer`]. It holds names, paths and locations, never key
//! material; `Debug` and `Display` show a remote or KMS endpoint as
//! `scheme://host[:port]` only (its URL may carry credentials).

use std::{fmt, path::PathBuf};

use serde::{Deserialize, Serialize};

use super::endpoint;

/// A submitter's signer, tagged by `kind`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SignerSpec {
    /// A hex private key (`0x` optional, surrounding white space ignored),
    /// from an environment variable (`env`, read at start: a running
    /// process's environment never changes) or from a file (`key_file`,
    /// read whenever the submitter is started, a reload that adds it
    /// included). Exactly one of the two.
    Env {
        /// Name of the variable holding the key (not the key itself).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        env: Option<String>,
        /// File holding the key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key_file: Option<PathBuf>,
    },
    /// An encrypted JSON keystore (Web3 Secret Storage) file.
    Keystore {
        /// Path of the keystore file.
        path: PathBuf,
        /// Name of the variable holding the keystore password.
        password_env: String,
    },
    /// A remote signer answering JSON-RPC `eth_signTransaction`
    /// (Clef/Web3Signer style).
    Remote {
        /// Endpoint; may embed basic-auth credentials or an API key.
        url: String,
        /// Account to sign with, when the signer holds several; must equal
        /// the submitter's address.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address: Option<String>,
        /// PEM file of a private CA trusted (besides the public roots) for
        /// an `https://` signer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<PathBuf>,
        /// Allow `http://` with credentials to a non-loopback signer
        /// (README "Security"): the default refuses it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        allow_insecure: bool,
    },
    /// A key held in AWS KMS (`ECC_SECG_P256K1`, `SIGN_VERIFY`); credentials
    /// come the standard AWS way (environment, profile, instance or task
    /// role), never from the configuration.
    #[serde(rename = "aws_kms")]
    AwsKms {
        /// Key id, key ARN or alias (`alias/…`).
        key_id: String,
        /// AWS region of the key.
        region: String,
        /// Another endpoint than AWS's: an emulator or a VPC endpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint_url: Option<String>,
        /// PEM of a private CA trusted for that endpoint (besides the
        /// compiled-in public roots; the operating system's store is not
        /// read).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<PathBuf>,
        /// Signing requests in flight to KMS for this key, at most.
        #[serde(default = "default_kms_concurrency")]
        max_concurrency: usize,
    },
    /// A key in a hardware security module, reached through the vendor's
    /// PKCS#11 module (SoftHSM2, Thales Luna, nShield, CloudHSM, YubiHSM 2,
    /// Utimaco): `CKM_ECDSA` over the transaction's hash with a secp256k1
    /// key that never leaves the module.
    Pkcs11(Pkcs11Spec),
}

/// A `pkcs11` signer's table: a key in a hardware security module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pkcs11Spec {
    /// Path of the vendor's PKCS#11 library (`.so`).
    pub module: PathBuf,
    /// Label of the token holding the key.
    pub token_label: String,
    /// `CKA_LABEL` of the key (its private and public objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_label: Option<String>,
    /// `CKA_ID` of the key, hex (instead of, or with, `key_label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// File holding the user PIN (surrounding white space ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_file: Option<PathBuf>,
    /// Name of the variable holding the user PIN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_env: Option<String>,
    /// Logged-in sessions open on the module at most, shared by every key
    /// on it (signatures in flight at once); every signer naming the
    /// module gives the same value.
    #[serde(default = "default_pkcs11_sessions")]
    pub max_sessions: usize,
}

/// Default `max_sessions` of a `pkcs11` signer.
pub const DEFAULT_PKCS11_SESSIONS: usize = 4;

fn default_pkcs11_sessions() -> usize {
    DEFAULT_PKCS11_SESSIONS
}

/// Default `max_concurrency` of an `aws_kms` signer.
pub const DEFAULT_KMS_CONCURRENCY: usize = 8;

fn default_kms_concurrency() -> usize {
    DEFAULT_KMS_CONCURRENCY
}

impl SignerSpec {
    /// A key from the environment variable `var`.
    pub fn env(var: impl Into<String>) -> Self {
        Self::Env {
            env: Some(var.into()),
            key_file: None,
        }
    }

    /// A remote signer at `url` (no account named, public roots, no
    /// plaintext exception).
    pub fn remote(url: impl Into<String>, ca_file: Option<PathBuf>) -> Self {
        Self::Remote {
            url: url.into(),
            address: None,
            ca_file,
            allow_insecure: false,
        }
    }

    /// Short name of the signer kind, for logs and metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Env { .. } => "env",
            Self::Keystore { .. } => "keystore",
            Self::Remote { .. } => "remote",
            Self::AwsKms { .. } => "aws_kms",
            Self::Pkcs11(_) => "pkcs11",
        }
    }

    /// The same signer with every URL cut to `scheme://host[:port]` (for
    /// `txmgr config check`).
    pub fn redacted(&self) -> Self {
        let mut shown = self.clone();
        match &mut shown {
            Self::Remote { url, .. } => *url = endpoint::redact_url(url),
            Self::AwsKms {
                endpoint_url: Some(url),
                ..
            } => *url = endpoint::redact_url(url),
            _ => {}
        }
        shown
    }
}

impl fmt::Debug for SignerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.redacted() {
            Self::Env { env, key_file } => f
                .debug_struct("Env")
                .field("env", &env)
                .field("key_file", &key_file)
                .finish(),
            Self::Keystore { path, password_env } => f
                .debug_struct("Keystore")
                .field("path", &path)
                .field("password_env", &password_env)
                .finish(),
            Self::Remote {
                url,
                address,
                ca_file,
                allow_insecure,
            } => f
                .debug_struct("Remote")
                .field("url", &url)
                .field("address", &address)
                .field("ca_file", &ca_file)
                .field("allow_insecure", &allow_insecure)
                .finish(),
            Self::AwsKms {
                key_id,
                region,
                endpoint_url,
                ca_file,
                max_concurrency,
            } => f
                .debug_struct("AwsKms")
                .field("key_id", &key_id)
                .field("region", &region)
                .field("endpoint_url", &endpoint_url)
                .field("ca_file", &ca_file)
                .field("max_concurrency", &max_concurrency)
                .finish(),
            Self::Pkcs11(spec) => spec.fmt(f),
        }
    }
}

impl fmt::Display for SignerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env { env: Some(var), .. } => write!(f, "env:{var}"),
            Self::Env {
                key_file: Some(path),
                ..
            } => write!(f, "key_file:{}", path.display()),
            Self::Env { .. } => f.write_str("env:?"),
            Self::Keystore { path, .. } => write!(f, "keystore:{}", path.display()),
            Self::Remote { url, .. } => write!(f, "remote:{}", endpoint::redact_url(url)),
            Self::AwsKms { key_id, region, .. } => write!(f, "aws_kms:{region}:{key_id}"),
            Self::Pkcs11(Pkcs11Spec {
                token_label,
                key_label: Some(label),
                ..
            }) => write!(f, "pkcs11:{token_label}:{label}"),
            Self::Pkcs11(Pkcs11Spec {
                token_label,
                key_id,
                ..
            }) => write!(
                f,
                "pkcs11:{token_label}:id:{}",
                key_id.as_deref().unwrap_or("?")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact_remote_credentials() {
        let spec = SignerSpec::remote("https://user:hunter2@signer.example:9000/rpc", None);
        for shown in [format!("{spec:?}"), spec.to_string()] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("signer.example"), "{shown}");
        }
        let kms = SignerSpec::AwsKms {
            key_id: "alias/k".into(),
            region: "eu-west-1".into(),
            endpoint_url: Some("https://kms.example/path?token=secret-in-url".into()),
            ca_file: None,
            max_concurrency: 8,
        };
        assert!(!format!("{kms:?}").contains("secret-in-url"));
    }

    #[test]
    fn it_reads_as_the_configuration_writes_it() {
        let spec: SignerSpec =
            toml::from_str("kind = \"env\"\nkey_file = \"/run/secrets/hot.key\"").expect("parses");
        assert_eq!(
            spec,
            SignerSpec::Env {
                env: None,
                key_file: Some("/run/secrets/hot.key".into())
            }
        );
        let kms: SignerSpec =
            toml::from_str("kind = \"aws_kms\"\nkey_id = \"k\"\nregion = \"r\"").expect("parses");
        assert_eq!(kms.kind(), "aws_kms");
        assert!(toml::from_str::<SignerSpec>("kind = \"env\"\nvar = \"X\"").is_err());
    }
}
