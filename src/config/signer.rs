//! Where a submitter's private key comes from. The configuration holds only
//! the names of environment variables and file paths, never key material;
//! Debug output still redacts credentials a remote signer URL may embed.

use std::{fmt, path::PathBuf};

use serde::{Deserialize, Serialize};

use super::{error::ConfigIssue, url, validate::check_address};

/// A submitter's signer, tagged by `kind` in the file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SignerConfig {
    /// A hex private key read from an environment variable at start.
    Env {
        /// Name of the variable holding the key (not the key itself).
        env: String,
    },
    /// An encrypted JSON keystore file.
    Keystore {
        /// Path of the keystore file.
        path: PathBuf,
        /// Name of the variable holding the keystore password.
        password_env: String,
    },
    /// A remote signer answering JSON-RPC `eth_signTransaction`
    /// (Clef/Web3Signer style).
    Remote {
        /// Endpoint of the remote signer.
        url: String,
        /// Account to sign with, when the signer holds several; must equal
        /// the submitter's address.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address: Option<String>,
        /// PEM file of a private CA trusted (besides the public roots) for an
        /// `https://` signer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<PathBuf>,
        /// Allow `http://` with credentials to a non-loopback signer
        /// (README "Security"): the default refuses it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        allow_insecure: bool,
    },
    /// A key held in AWS KMS (`ECC_SECG_P256K1`, `SIGN_VERIFY`). Credentials
    /// come the standard AWS way (environment, profile, instance or task
    /// role), never from this file.
    #[serde(rename = "aws_kms")]
    AwsKms {
        /// Key id, key ARN or alias (`alias/…`).
        key_id: String,
        /// AWS region of the key.
        region: String,
        /// Another endpoint than AWS's: an emulator or a VPC endpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint_url: Option<String>,
        /// Signing requests in flight to KMS for this key, at most.
        #[serde(default = "default_kms_concurrency")]
        max_concurrency: usize,
    },
}

/// Default `max_concurrency` of an `aws_kms` signer.
fn default_kms_concurrency() -> usize {
    8
}

impl SignerConfig {
    /// Short name of the signer kind, for logs and metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Env { .. } => "env",
            Self::Keystore { .. } => "keystore",
            Self::Remote { .. } => "remote",
            Self::AwsKms { .. } => "aws_kms",
        }
    }

    /// Checks this signer for the submitter `address` (lower-case); `prefix`
    /// is the dotted key of the signer table.
    pub(crate) fn validate(&self, prefix: &str, address: &str) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        match self {
            Self::Env { env } => check_env_name(&format!("{prefix}.env"), env, &mut issues),
            Self::Keystore { path, password_env } => {
                if path.as_os_str().is_empty() {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.path"),
                        "must not be empty",
                    ));
                }
                check_env_name(&format!("{prefix}.password_env"), password_env, &mut issues);
            }
            Self::Remote {
                url,
                address: signer_address,
                ca_file,
                ..
            } => {
                if let Err(reason) = url::check_url(url, &["http", "https"]) {
                    issues.push(ConfigIssue::new(format!("{prefix}.url"), reason));
                }
                if let Some(path) = ca_file {
                    if !path.is_file() {
                        issues.push(ConfigIssue::new(
                            format!("{prefix}.ca_file"),
                            format!("{} is not a readable file", path.display()),
                        ));
                    }
                }
                if let Some(given) = signer_address {
                    check_signer_address(prefix, given, address, &mut issues);
                }
            }
            Self::AwsKms {
                key_id,
                region,
                endpoint_url,
                max_concurrency,
            } => {
                if key_id.trim().is_empty() {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.key_id"),
                        "must name the KMS key (id, ARN or alias/…)",
                    ));
                }
                let region_ok = !region.is_empty()
                    && region
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                if !region_ok {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.region"),
                        "must be an AWS region such as \"eu-west-1\"",
                    ));
                }
                if let Some(url) = endpoint_url {
                    if let Err(reason) = url::check_url(url, &["http", "https"]) {
                        issues.push(ConfigIssue::new(format!("{prefix}.endpoint_url"), reason));
                    }
                }
                if !(1..=256).contains(max_concurrency) {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.max_concurrency"),
                        "must be between 1 and 256",
                    ));
                }
            }
        }
        issues
    }

    /// Lower-cases the optional remote signer address.
    pub(crate) fn normalise(&mut self) {
        if let Self::Remote {
            address: Some(a), ..
        } = self
        {
            a.make_ascii_lowercase();
        }
    }
}

/// The `address` of a remote signer must be the submitter's.
fn check_signer_address(prefix: &str, given: &str, address: &str, issues: &mut Vec<ConfigIssue>) {
    let key = format!("{prefix}.address");
    match check_address(given) {
        Err(reason) => issues.push(ConfigIssue::new(key, reason)),
        Ok(normalised) if normalised != address => issues.push(ConfigIssue::new(
            key,
            format!("{normalised} differs from the submitter address {address}"),
        )),
        Ok(_) => {}
    }
}

/// Environment variable names: letters, digits and `_`, not starting with a
/// digit, so a typo such as a pasted key is caught before start.
fn check_env_name(key: &str, name: &str, issues: &mut Vec<ConfigIssue>) {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        // Do not echo the value: a private key pasted here must not be logged.
        issues.push(ConfigIssue::new(
            key,
            "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), not a value",
        ));
    }
}

impl fmt::Debug for SignerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env { env } => f.debug_struct("Env").field("env", env).finish(),
            Self::Keystore { path, password_env } => f
                .debug_struct("Keystore")
                .field("path", path)
                .field("password_env", password_env)
                .finish(),
            Self::Remote {
                url: u,
                address,
                ca_file,
                allow_insecure,
            } => f
                .debug_struct("Remote")
                .field("url", &url::shown_url(u))
                .field("address", address)
                .field("ca_file", ca_file)
                .field("allow_insecure", allow_insecure)
                .finish(),
            Self::AwsKms {
                key_id,
                region,
                endpoint_url,
                max_concurrency,
            } => f
                .debug_struct("AwsKms")
                .field("key_id", key_id)
                .field("region", region)
                .field("endpoint_url", &endpoint_url.as_deref().map(url::shown_url))
                .field("max_concurrency", max_concurrency)
                .finish(),
        }
    }
}

impl fmt::Display for SignerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env { env } => write!(f, "env:{env}"),
            Self::Keystore { path, .. } => write!(f, "keystore:{}", path.display()),
            Self::Remote { url: u, .. } => write!(f, "remote:{}", url::shown_url(u)),
            Self::AwsKms { key_id, region, .. } => write!(f, "aws_kms:{region}:{key_id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact_remote_credentials() {
        let s = SignerConfig::Remote {
            url: "https://u:topsecret@signer:9000".into(),
            address: None,
            ca_file: None,
            allow_insecure: false,
        };
        assert!(!format!("{s:?}").contains("topsecret"));
        assert!(!s.to_string().contains("topsecret"));
    }

    #[test]
    fn env_name_that_looks_like_a_key_is_rejected_without_echo() {
        let key = "0x".to_string() + &"ab".repeat(32);
        let s = SignerConfig::Env { env: key.clone() };
        let issues = s.validate("submitters.0x1.signer", "0x1");
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, "submitters.0x1.signer.env");
        assert!(!issues[0].reason.contains(&key));
    }
}
