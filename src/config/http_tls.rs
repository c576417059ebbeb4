//! `[http.tls]`: serve the API over HTTPS, optionally with client
//! certificates, and the bounds on handshakes in progress (README "HTTPS
//! for the API").

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

use super::ConfigIssue;

/// Default `http.tls.handshake_timeout`: long enough for a client across a
/// slow link, short enough that an idle socket soon gives its place back.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Default `http.tls.max_pending_handshakes`: a few hundred kilobytes of
/// TLS state and sockets at most, far above what live clients keep pending.
pub const DEFAULT_MAX_PENDING_HANDSHAKES: usize = 512;

/// Largest `http.tls.max_pending_handshakes`: each pending handshake holds a
/// socket and its TLS state.
const MAX_PENDING_HANDSHAKES: usize = 65_536;

/// Longest `http.tls.handshake_timeout`.
const MAX_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// `[http.tls]`: serve the API over HTTPS, optionally with client certificates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTlsConfig {
    /// PEM certificate chain of the server (leaf first).
    pub cert_file: PathBuf,
    /// PEM private key of the server (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM CA certificate(s): when set, every client must present a
    /// certificate issued by them (mutual TLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca_file: Option<PathBuf>,
    /// A connection that has not finished its handshake by then is closed,
    /// so an idle socket holds its place for this long at most.
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// Handshakes in progress at once on this node; a newcomer beyond it
    /// closes the oldest one pending (never itself), so idle sockets cannot
    /// keep live clients out.
    #[serde(default = "default_max_pending_handshakes")]
    pub max_pending_handshakes: usize,
    /// Optional: handshakes in progress at once from one peer address; a
    /// newcomer beyond it closes that address's oldest pending one. Unset
    /// (the default): no per-address cap, as every client behind one NAT,
    /// L4 load balancer or sidecar shares an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_handshakes_per_peer: Option<usize>,
}

fn default_handshake_timeout() -> Duration {
    DEFAULT_HANDSHAKE_TIMEOUT
}

fn default_max_pending_handshakes() -> usize {
    DEFAULT_MAX_PENDING_HANDSHAKES
}

impl HttpTlsConfig {
    /// The issues of the handshake bounds (the files are checked with the
    /// other paths of the configuration).
    pub(crate) fn validate(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if self.handshake_timeout.is_zero() || self.handshake_timeout > MAX_HANDSHAKE_TIMEOUT {
            issues.push(ConfigIssue::new(
                "http.tls.handshake_timeout",
                "must be more than 0s and at most 60s",
            ));
        }
        if !(1..=MAX_PENDING_HANDSHAKES).contains(&self.max_pending_handshakes) {
            issues.push(ConfigIssue::new(
                "http.tls.max_pending_handshakes",
                format!("must be between 1 and {MAX_PENDING_HANDSHAKES}"),
            ));
        }
        if let Some(per_peer) = self.max_handshakes_per_peer {
            if per_peer == 0 || per_peer > self.max_pending_handshakes {
                issues.push(ConfigIssue::new(
                    "http.tls.max_handshakes_per_peer",
                    "must be between 1 and http.tls.max_pending_handshakes (unset: no per-address cap)",
                ));
            }
        }
        issues
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(extra: &str) -> HttpTlsConfig {
        toml::from_str(&format!(
            "cert_file = \"/c.pem\"\nkey_file = \"/k.pem\"\n{extra}"
        ))
        .expect("parses")
    }

    #[test]
    fn defaults_have_a_deadline_a_node_cap_and_no_per_address_cap() {
        let config = tls("");
        assert_eq!(config.handshake_timeout, DEFAULT_HANDSHAKE_TIMEOUT);
        assert_eq!(
            config.max_pending_handshakes,
            DEFAULT_MAX_PENDING_HANDSHAKES
        );
        assert_eq!(config.max_handshakes_per_peer, None);
        assert!(config.validate().is_empty());
    }

    #[test]
    fn bad_bounds_are_named() {
        let keys = |extra: &str| -> Vec<String> {
            tls(extra).validate().into_iter().map(|i| i.key).collect()
        };
        assert_eq!(
            keys("handshake_timeout = \"0s\""),
            ["http.tls.handshake_timeout"]
        );
        assert_eq!(
            keys("max_pending_handshakes = 0"),
            ["http.tls.max_pending_handshakes"]
        );
        assert_eq!(
            keys("max_pending_handshakes = 8\nmax_handshakes_per_peer = 9"),
            ["http.tls.max_handshakes_per_peer"]
        );
        assert!(keys("max_pending_handshakes = 8\nmax_handshakes_per_peer = 8").is_empty());
    }
}
