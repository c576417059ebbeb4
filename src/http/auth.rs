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

use std::{collections::HashSet, num::NonZeroU32, sync::Arc, time::Duration};

use alloy::primitives::Address;
use axum::{
    extract::{FromRequestParts, Request, State},
    http::{header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{error::ApiError, AppState};
use crate::config::{AuthConfig, Role, TokenRate};

/// One accepted token, as configured.
#[derive(Debug, Clone)]
struct TokenEntry {
    name: Arc<str>,
    role: Role,
    hash: [u8; 32],
    submitters: Option<Arc<Allowed>>,
    create_rate: Option<Arc<CreateRate>>,
}

/// A token's create rate on this node: a token bucket (GCRA, `governor`)
/// shared by every request with the token.
#[derive(Debug)]
pub struct CreateRate {
    limiter: governor::DefaultDirectRateLimiter,
    /// As configured, for the refusal's message.
    per_second: f64,
}

impl CreateRate {
    fn new(rate: &TokenRate) -> Option<Self> {
        let period = Duration::try_from_secs_f64(1.0 / rate.creates_per_second).ok()?;
        let burst = NonZeroU32::new(rate.burst_or_default())?;
        let quota = governor::Quota::with_period(period)?.allow_burst(burst);
        Some(Self {
            limiter: governor::RateLimiter::direct(quota),
            per_second: rate.creates_per_second,
        })
    }

    /// Takes one create from the bucket, or says how long until one is there.
    fn take(&self) -> Result<(), Duration> {
        self.limiter.check().map_err(|not_until| {
            not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ))
        })
    }
}

/// A token's allow-list: addresses on every chain, and addresses on one.
#[derive(Debug, Default)]
struct Allowed {
    /// `0x…` entries.
    everywhere: HashSet<Address>,
    /// `<chain id>:0x…` entries.
    on_chain: HashSet<(u64, Address)>,
}

impl Allowed {
    /// From the normalised entries of `auth.tokens.N.submitters`.
    fn parse(entries: &[String]) -> Self {
        let mut allowed = Allowed::default();
        for entry in entries {
            match entry.split_once(':') {
                Some((chain, address)) => {
                    if let (Ok(chain), Ok(address)) = (chain.parse(), address.parse()) {
                        allowed.on_chain.insert((chain, address));
                    }
                }
                None => {
                    if let Ok(address) = entry.parse() {
                        allowed.everywhere.insert(address);
                    }
                }
            }
        }
        allowed
    }

    fn on_some_chain(&self, address: &Address) -> bool {
        self.everywhere.contains(address) || self.on_chain.iter().any(|(_, a)| a == address)
    }

    fn on(&self, chain_id: u64, address: &Address) -> bool {
        self.everywhere.contains(address) || self.on_chain.contains(&(chain_id, *address))
    }
}

/// The configured tokens, ready for checking. Empty = authentication off.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<TokenEntry>,
}

/// Who made the request; put into the request's extensions by the
/// middleware. Handlers take it as an extractor (a request that reached a
/// handler without one is refused 401: no route is open by accident) and use
/// [`Caller::check_submitter`] or [`Caller::scope_on`].
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name (for audit logs), `anonymous` without auth.
    pub name: Arc<str>,
    /// The token's role.
    pub role: Role,
    submitters: Option<Arc<Allowed>>,
    create_rate: Option<Arc<CreateRate>>,
}

impl Caller {
    /// The caller when authentication is off: may do everything.
    pub fn anonymous() -> Self {
        Caller {
            name: Arc::from("anonymous"),
            role: Role::Ops,
            submitters: None,
            create_rate: None,
        }
    }

    /// Counts one create against the token's rate (`[[auth.tokens]] rate`):
    /// 429 `rate_limited` with `Retry-After` beyond it.
    pub fn check_create_rate(&self) -> Result<(), ApiError> {
        let Some(rate) = &self.create_rate else {
            return Ok(());
        };
        rate.take().map_err(|wait| ApiError::RateLimited {
            message: format!(
                "token {:?} is over its rate of {} creates per second on this node",
                &*self.name, rate.per_second
            ),
            retry_after: wait,
        })
    }

    /// Whether this caller may use `submitter` on at least one chain.
    pub fn may_use(&self, submitter: &Address) -> bool {
        self.submitters
            .as_ref()
            .is_none_or(|allowed| allowed.on_some_chain(submitter))
    }

    /// Whether this caller may use `submitter` on `chain_id`.
    pub fn may_use_on(&self, chain_id: txmgr_actors::domain::ChainId, submitter: &Address) -> bool {
        self.submitters
            .as_ref()
            .is_none_or(|allowed| allowed.on(chain_id.get(), submitter))
    }

    /// The `(chain, address)` pairs this caller
    /// may use among `served` chains; `None` = every submitter.
    pub fn scope_on(
        &self,
        served: &[txmgr_actors::domain::ChainId],
    ) -> Option<Vec<(txmgr_actors::domain::ChainId, String)>> {
        self.submitters.as_ref().map(|allowed| {
            let mut pairs = Vec::new();
            for chain in served {
                for address in &allowed.everywhere {
                    pairs.push((*chain, format!("{address:#x}")));
                }
            }
            for (chain, address) in &allowed.on_chain {
                pairs.push(((*chain).into(), format!("{address:#x}")));
            }
            pairs
        })
    }

    /// Whether the token is limited to some submitters: such a caller is
    /// shown nothing that sums up every submitter (node-wide samples,
    /// webhook statuses, `/metrics`).
    pub fn is_scoped(&self) -> bool {
        self.submitters.is_some()
    }

    /// 403 `forbidden` unless the token is not limited to some submitters:
    /// `what` acts on the whole node or cluster (a reload), which a token
    /// scoped to a few submitters must not do.
    pub fn check_unscoped(&self, what: &str) -> Result<(), ApiError> {
        if self.submitters.is_none() {
            Ok(())
        } else {
            Err(ApiError::Forbidden {
                message: format!(
                    "token {:?} is limited to some submitters and may not {what}",
                    &*self.name
                ),
                field: None,
            })
        }
    }

    /// 403 `forbidden` (field `submitter`) unless the caller may use the
    /// submitter on `chain_id`.
    pub fn check_submitter_on(
        &self,
        chain_id: txmgr_actors::domain::ChainId,
        submitter: &Address,
    ) -> Result<(), ApiError> {
        if self.may_use_on(chain_id, submitter) {
            Ok(())
        } else {
            Err(ApiError::Forbidden {
                message: format!(
                    "token {:?} may not use submitter {submitter:#x} on chain {chain_id}",
                    &*self.name
                ),
                field: Some("submitter".to_owned()),
            })
        }
    }

    /// 403 `forbidden` (field `submitter`) unless the caller may use it.
    pub fn check_submitter(&self, submitter: &Address) -> Result<(), ApiError> {
        if self.may_use(submitter) {
            Ok(())
        } else {
            Err(ApiError::Forbidden {
                message: format!(
                    "token {:?} may not use submitter {submitter:#x}",
                    &*self.name
                ),
                field: Some("submitter".to_owned()),
            })
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    /// The caller the middleware identified. None is there only on the open
    /// paths (which take no caller) or when the router was built without
    /// [`require_token`]; either way the request is refused, never served
    /// as if it were anonymous.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or(ApiError::Unauthorized)
    }
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
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let auth = &state.ops.auth;
    let path = request.uri().path().to_owned();
    if !auth.enabled() {
        request.extensions_mut().insert(Caller::anonymous());
        return next.run(request).await;
    }
    if is_open(&path, state.ops.metrics_public) {
        return next.run(request).await;
    }
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
    if ops_only(&path) && caller.role != Role::Ops {
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
