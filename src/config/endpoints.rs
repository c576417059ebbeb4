//! Checks of `[chain]`'s endpoints: one shorthand or a list, unique names fit
//! for metric labels, URLs of the right schemes (never echoed: they may
//! carry API keys).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{
    url::{check_url, shown_url},
    ChainConfig,
};

/// One JSON-RPC endpoint of `chain.rpc_urls`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcEndpointConfig {
    /// How the endpoint is shown everywhere (logs, errors, metrics, ops
    /// views): its URL may carry an API key and is never shown.
    pub name: String,
    /// `http://` or `https://` JSON-RPC URL.
    pub url: String,
    /// Optional `ws://` or `wss://` URL for new-head subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_url: Option<String>,
    /// Allow a plaintext (`http://`, `ws://`) URL carrying a key to a
    /// non-loopback host (README "Security"): the default refuses it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure: bool,
    /// `full` (read from and sent to) or `send_only` (a private mempool or a
    /// sequencer's direct endpoint: only sent to, and the only target of
    /// private sends).
    #[serde(default, skip_serializing_if = "EndpointRole::is_full")]
    pub role: EndpointRole,
}

/// What an endpoint is used for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointRole {
    /// Read from and sent to.
    #[default]
    Full,
    /// Only sent to; never read from nor probed.
    SendOnly,
}

impl EndpointRole {
    fn is_full(&self) -> bool {
        *self == EndpointRole::Full
    }
}

impl fmt::Debug for RpcEndpointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RpcEndpointConfig")
            .field("name", &self.name)
            .field("url", &shown_url(&self.url))
            .field("ws_url", &self.ws_url.as_deref().map(shown_url))
            .field("allow_insecure", &self.allow_insecure)
            .field("role", &self.role)
            .finish()
    }
}

/// `<chain>.rpc_url` (+ `ws_url`) or `<chain>.rpc_urls`, never both (a
/// chain without endpoints is refused); names unique and fit for metric
/// labels; URLs of the right schemes. `prefix` is the chain's key (`chain`
/// or `chains.<name>`).
pub(super) fn check_endpoints(
    prefix: &str,
    chain: &ChainConfig,
    push: &mut impl FnMut(&str, String),
) {
    match (&chain.rpc_url, chain.rpc_urls.is_empty()) {
        (None, true) => push(
            &format!("{prefix}.rpc_url"),
            format!("required: set {prefix}.rpc_url or list endpoints in {prefix}.rpc_urls"),
        ),
        (Some(_), false) => push(
            &format!("{prefix}.rpc_urls"),
            format!("set either {prefix}.rpc_url (one endpoint) or {prefix}.rpc_urls, not both"),
        ),
        _ => {}
    }
    if chain.ws_url.is_some() && !chain.rpc_urls.is_empty() {
        push(
            &format!("{prefix}.ws_url"),
            format!("with {prefix}.rpc_urls, give each endpoint its own ws_url"),
        );
    }
    let keyed = |i: usize, field: &str| {
        if chain.rpc_urls.is_empty() {
            format!("{prefix}.{field}")
        } else {
            format!("{prefix}.rpc_urls[{i}].{field}")
        }
    };
    let endpoints = chain.endpoints();
    if !endpoints.is_empty() && endpoints.iter().all(|e| e.role == EndpointRole::SendOnly) {
        push(
            &format!("{prefix}.rpc_urls"),
            "every endpoint is send_only: at least one must be read from".into(),
        );
    }
    let mut names = std::collections::HashSet::new();
    for (i, endpoint) in chain.endpoints().iter().enumerate() {
        let name = &endpoint.name;
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            push(
                &keyed(i, "name"),
                "must be 1-64 characters of a-z, A-Z, 0-9, '-', '_', '.'".into(),
            );
        } else if !names.insert(name.clone()) {
            push(
                &keyed(i, "name"),
                format!("duplicate endpoint name {name:?}"),
            );
        }
        let url_key = if chain.rpc_urls.is_empty() {
            "rpc_url"
        } else {
            "url"
        };
        if let Err(reason) = check_url(&endpoint.url, &["http", "https"]) {
            push(&keyed(i, url_key), reason);
        }
        if let Some(ws) = &endpoint.ws_url {
            if endpoint.role == EndpointRole::SendOnly {
                push(
                    &keyed(i, "ws_url"),
                    "a send_only endpoint is never read from: no ws_url".into(),
                );
            } else if let Err(reason) = check_url(ws, &["ws", "wss"]) {
                push(&keyed(i, "ws_url"), reason);
            }
        }
    }
}
