//! Bearer-token authentication and authorisation (README "Security").
//!
//! ```text
//! request ─► open path? (/healthz /readyz /ops/ /v1/openapi.json, /metrics if public) ─► handler
//!         └► Authorization: Bearer T ─► sha256(T) vs every configured hash (constant time)
//!              ├─ none matches ─► 401 unauthorized + WWW-Authenticate
//!              ├─ /v1/ops/* and role client ─► 403 forbidden
//!              └─ Caller{name, role, allow-list, create rate} in the request ─► handler checks submitters
//!                 (and a create its token's rate: 429 rate_limited beyond it)
//! ```
//!
//! Tokens are stored only as SHA-256 hashes; the token itself is never kept,
//! logged or echoed. With no tokens configured everything is open (config
//! validation only allows that on a loopback listen address).

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use super::caller::{Caller, CreateRate};
use super::{caller::Allowed, error::ApiError, OpsState};
use crate::config::{AuthConfig, Role};

/// One accepted token, as configured.
#[derive(Debug, Clone)]
struct TokenEntry {
    name: Arc<str>,
    role: Role,
    hash: [u8; 32],
    submitters: Option<Arc<Allowed>>,
    create_rate: Option<Arc<CreateRate>>,
}

/// The configured tokens, ready for checking. Empty = authentication off.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<TokenEntry>,
}

/// The lower-case hex SHA-256 of a token, as `[[auth.tokens]] sha256` holds it.
pub fn token_hash_hex(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A fresh bearer token: 32 random bytes from the OS-seeded CSPRNG, hex.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// The `[[auth.tokens]]` TOML entry for `token` (its hash, never the token).
pub fn token_entry_toml(name: &str, role: &str, token: &str) -> String {
    let name = toml::Value::String(name.to_owned());
    format!(
        "[[auth.tokens]]\nname = {name}\nrole = \"{role}\"\nsha256 = \"{}\"\n# submitters = [\"0x…\"]  # optional allow-list (client tokens)\n# rate = {{ creates_per_second = 50, burst = 100 }}  # optional create rate, per node\n",
        token_hash_hex(token)
    )
}

impl Auth {
    /// Builds the checker from `[auth]` (already validated: hashes are 64
    /// hex characters, addresses well-formed).
    pub fn from_config(config: &AuthConfig) -> Self {
        let tokens = config
            .tokens
            .iter()
            .filter_map(|token| {
                let mut hash = [0u8; 32];
                hex::decode_to_slice(&token.sha256, &mut hash).ok()?;
                let submitters = token
                    .submitters
                    .as_ref()
                    .map(|list| Arc::new(Allowed::parse(list)));
                Some(TokenEntry {
                    name: Arc::from(token.name.as_str()),
                    role: token.role,
                    hash,
                    submitters,
                    create_rate: token.rate.as_ref().and_then(CreateRate::new).map(Arc::new),
                })
            })
            .collect();
        Auth { tokens }
    }

    /// True when at least one token is configured.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The caller a bearer token identifies. Every configured hash is
    /// compared, in constant time, so timing reveals neither which token
    /// matched nor how much of a hash did.
    pub fn identify(&self, token: &str) -> Option<Caller> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for entry in &self.tokens {
            if bool::from(entry.hash.ct_eq(&digest)) {
                found = Some(entry);
            }
        }
        found.map(|entry| Caller {
            name: entry.name.clone(),
            role: entry.role,
            submitters: entry.submitters.clone(),
            create_rate: entry.create_rate.clone(),
        })
    }
}

/// Paths anyone may reach: liveness, readiness, the dashboard page (it asks
/// for a token itself) and the API description. The OpenAPI document's
/// security and 401 answers are derived from it.
pub(crate) fn is_open(path: &str, metrics_public: bool) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/ops" | "/ops/" | "/v1/openapi.json"
    ) || (path == "/metrics" && metrics_public)
}

/// Paths only an `ops` token may use (others get 403).
pub(crate) fn ops_only(path: &str) -> bool {
    path.starts_with("/v1/ops/") || path == "/metrics"
}

/// The middleware: authenticates, authorises the route's role, and puts the
/// [`Caller`] into the request for per-submitter checks.
pub async fn require_token(
    State(ops): State<Arc<OpsState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let auth = &ops.auth;
    if !auth.enabled() {
        request.extensions_mut().insert(Caller::anonymous());
        return next.run(request).await;
    }
    let path = request.uri().path();
    if is_open(path, ops.metrics_public) {
        return next.run(request).await;
    }
    let ops_route = ops_only(path);
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(str::trim);
    let Some(caller) = token.and_then(|t| auth.identify(t)) else {
        return ApiError::Unauthorized.into_response();
    };
    if ops_route && caller.role != Role::Ops {
        return ApiError::Forbidden {
            message: format!("token {:?} lacks the ops role", &*caller.name),
            field: None,
        }
        .into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TokenConfig;
    use alloy::primitives::Address;

    fn auth() -> Auth {
        Auth::from_config(&AuthConfig {
            tokens: vec![
                TokenConfig {
                    name: "ops".into(),
                    role: Role::Ops,
                    sha256: token_hash_hex("secret-ops"),
                    submitters: None,
                    rate: None,
                },
                TokenConfig {
                    name: "svc".into(),
                    role: Role::Client,
                    sha256: token_hash_hex("secret-svc"),
                    submitters: Some(vec!["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into()]),
                    rate: None,
                },
            ],
        })
    }

    #[test]
    fn identifies_by_hash_and_applies_the_allow_list() {
        let auth = auth();
        assert!(auth.identify("nope").is_none());
        assert_eq!(auth.identify("secret-ops").map(|c| c.role), Some(Role::Ops));
        let svc = auth.identify("secret-svc").expect("client token");
        let allowed: Address = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
            .parse()
            .expect("address");
        assert!(svc.may_use(&allowed));
        assert!(!svc.may_use(&Address::ZERO));
        assert_eq!(
            svc.check_submitter(&Address::ZERO).map_err(|e| e.code()),
            Err("forbidden")
        );
    }

    #[test]
    fn hash_is_lower_case_hex_sha256() {
        assert_eq!(
            token_hash_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
