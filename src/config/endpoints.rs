//! Checks of `[chain]`'s endpoints: one shorthand or a list, unique names fit
//! for metric labels, URLs of the right schemes (never echoed: they may
//! carry API keys).

use super::{url::check_url, ChainConfig};

/// `chain.rpc_url` (+ `ws_url`) or `chain.rpc_urls`, never both; names
/// unique and fit for metric labels; URLs of the right schemes.
pub(super) fn check_endpoints(chain: &ChainConfig, push: &mut impl FnMut(&str, String)) {
    match (&chain.rpc_url, chain.rpc_urls.is_empty()) {
        (None, true) => push(
            "chain.rpc_url",
            "required: set chain.rpc_url or list endpoints in [[chain.rpc_urls]]".into(),
        ),
        (Some(_), false) => push(
            "chain.rpc_urls",
            "set either chain.rpc_url (one endpoint) or chain.rpc_urls, not both".into(),
        ),
        _ => {}
    }
    if chain.ws_url.is_some() && !chain.rpc_urls.is_empty() {
        push(
            "chain.ws_url",
            "with chain.rpc_urls, give each endpoint its own ws_url".into(),
        );
    }
    let keyed = |i: usize, field: &str| {
        if chain.rpc_urls.is_empty() {
            format!("chain.{field}")
        } else {
            format!("chain.rpc_urls[{i}].{field}")
        }
    };
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
            if let Err(reason) = check_url(ws, &["ws", "wss"]) {
                push(&keyed(i, "ws_url"), reason);
            }
        }
    }
}
