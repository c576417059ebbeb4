//! `[[auth.tokens]]`: bearer tokens, stored as SHA-256 hashes, each with a
//! role and an optional submitter allow-list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{error::ConfigIssue, validate::check_address};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Create and read transactions.
    Client,
    /// Everything a client may do, plus operator actions.
    Ops,
}

/// The `[auth]` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Accepted tokens. Empty = no authentication, which is only allowed
    /// when `http.listen` is a loopback address.
    pub tokens: Vec<TokenConfig>,
}

/// One accepted bearer token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// Unique name, used in logs instead of the token.
    pub name: String,
    /// What the token may do.
    pub role: Role,
    /// Lower-case hex SHA-256 of the token (64 hex chars); the token itself
    /// is never stored.
    pub sha256: String,
    /// Submitters this token may use; `None` = all. An entry is an address
    /// (on every chain) or `<chain name or id>:<address>` (on that chain);
    /// normalised on load to the address or `<chain id>:<address>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitters: Option<Vec<String>>,
    /// How fast this token may create; `None` = no limit of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<TokenRate>,
}

/// A token's create rate: `creates_per_second` on average, up to `burst` at
/// once (a token bucket, per node).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRate {
    /// Sustained creates per second (a fraction is allowed: 0.5 = one every
    /// 2 s), from one a day to 1,000,000.
    pub creates_per_second: f64,
    /// Creates allowed at once after a quiet period; default: the rate
    /// rounded up (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// The highest `creates_per_second` accepted: one create per microsecond.
const MAX_CREATES_PER_SECOND: f64 = 1_000_000.0;
/// The slowest `creates_per_second` accepted: one create a day.
const MIN_CREATES_PER_SECOND: f64 = 1.0 / 86_400.0;

impl TokenRate {
    /// The bucket size: `burst`, or the rate rounded up (at least 1).
    pub fn burst_or_default(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| {
                self.creates_per_second
                    .ceil()
                    .clamp(1.0, f64::from(u32::MAX)) as u32
            })
            .max(1)
    }

    fn issues(&self, prefix: &str) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let rate = self.creates_per_second;
        if !(MIN_CREATES_PER_SECOND..=MAX_CREATES_PER_SECOND).contains(&rate) {
            issues.push(ConfigIssue::new(
                format!("{prefix}.rate.creates_per_second"),
                format!(
                    "must be between one a day ({MIN_CREATES_PER_SECOND:.3e}) and {MAX_CREATES_PER_SECOND} per second, got {rate}"
                ),
            ));
        }
        if self.burst == Some(0) {
            issues.push(ConfigIssue::new(
                format!("{prefix}.rate.burst"),
                "must be at least 1",
            ));
        }
        issues
    }
}

impl AuthConfig {
    /// Normalises hashes and addresses to lower case (and chain names in
    /// allow-lists to chain ids, from `chains`: `(name, id)`) and returns the
    /// issues found.
    pub(crate) fn normalise_and_validate(&mut self, chains: &[(String, u64)]) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        let mut hashes: BTreeMap<String, usize> = BTreeMap::new();
        for (i, token) in self.tokens.iter_mut().enumerate() {
            let prefix = format!("auth.tokens.{i}");
            if token.name.trim().is_empty() {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.name"),
                    "must not be empty",
                ));
            } else if let Some(first) = names.insert(token.name.clone(), i) {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.name"),
                    format!(
                        "duplicate token name {:?} (also auth.tokens.{first})",
                        token.name
                    ),
                ));
            }
            if token.sha256.len() != 64 || !token.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.sha256"),
                    "must be 64 hex characters (the SHA-256 of the token, not the token)",
                ));
            } else {
                token.sha256.make_ascii_lowercase();
                // Two entries for one token: which role and allow-list would
                // apply is an accident of order. Refused, naming both.
                if let Some(first) = hashes.insert(token.sha256.clone(), i) {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.sha256"),
                        format!(
                            "the same token hash as auth.tokens.{first}: one token, one entry (its role and allow-list would depend on the order)"
                        ),
                    ));
                }
            }
            if let Some(rate) = &token.rate {
                issues.extend(rate.issues(&prefix));
            }
            for (j, entry) in token.submitters.iter_mut().flatten().enumerate() {
                match normalise_allowed(entry, chains) {
                    Ok(normalised) => *entry = normalised,
                    Err(reason) => {
                        issues.push(ConfigIssue::new(format!("{prefix}.submitters.{j}"), reason))
                    }
                }
            }
        }
        issues
    }
}

/// An allow-list entry: `0x…` (every chain) stays the lower-case address;
/// `<chain name or id>:0x…` becomes `<chain id>:<address>`.
fn normalise_allowed(entry: &str, chains: &[(String, u64)]) -> Result<String, String> {
    let Some((chain, address)) = entry.split_once(':') else {
        return check_address(entry);
    };
    let address = check_address(address)?;
    let id = super::chains::chain_id_of(chain, chains).map_err(|e| format!("{entry:?}: {e}"))?;
    Ok(format!("{id}:{address}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, sha256: &str) -> TokenConfig {
        TokenConfig {
            name: name.into(),
            role: Role::Client,
            sha256: sha256.into(),
            submitters: None,
            rate: None,
        }
    }

    #[test]
    fn a_rate_out_of_bounds_or_a_zero_burst_is_refused_naming_the_key() {
        let mut auth = AuthConfig {
            tokens: vec![TokenConfig {
                rate: Some(TokenRate {
                    creates_per_second: 0.0,
                    burst: Some(0),
                }),
                ..token("app", &"ab".repeat(32))
            }],
        };
        let issues = auth.normalise_and_validate(&[]);
        let fields: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            fields,
            [
                "auth.tokens.0.rate.creates_per_second",
                "auth.tokens.0.rate.burst"
            ],
            "{issues:?}"
        );
        let rate = TokenRate {
            creates_per_second: 2.5,
            burst: None,
        };
        assert_eq!(rate.burst_or_default(), 3);
        let slow = TokenRate {
            creates_per_second: 0.1,
            burst: None,
        };
        assert_eq!(slow.burst_or_default(), 1);
        assert!(slow.issues("t").is_empty());
    }

    #[test]
    fn one_hash_in_two_entries_is_refused_naming_both() {
        let hash = "ab".repeat(32);
        let mut auth = AuthConfig {
            tokens: vec![
                token("a", &hash),
                token("b", &"cd".repeat(32)),
                token("c", &hash.to_uppercase()),
            ],
        };
        let issues = auth.normalise_and_validate(&[]);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].key, "auth.tokens.2.sha256");
        assert!(issues[0].reason.contains("auth.tokens.0"), "{issues:?}");
    }
}
