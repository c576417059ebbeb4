//! Who made a request and what it may use: the [`Caller`] the auth
//! middleware (`auth`) puts into the request, its token's submitter
//! allow-list and its create rate (README "Security").

use std::{collections::HashSet, num::NonZeroU32, sync::Arc, time::Duration};

use alloy::primitives::Address;
use axum::{extract::FromRequestParts, http::request::Parts};

use super::error::ApiError;
use crate::config::{Role, TokenRate};

/// A token's create rate on this node: a token bucket (GCRA, `governor`)
/// shared by every request with the token.
#[derive(Debug)]
pub struct CreateRate {
    limiter: governor::DefaultDirectRateLimiter,
    /// As configured, for the refusal's message.
    per_second: f64,
}

impl CreateRate {
    pub(super) fn new(rate: &TokenRate) -> Option<Self> {
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
pub(super) struct Allowed {
    /// `0x…` entries.
    everywhere: HashSet<Address>,
    /// `<chain id>:0x…` entries.
    on_chain: HashSet<(u64, Address)>,
}

impl Allowed {
    /// From the normalised entries of `auth.tokens.N.submitters`.
    pub(super) fn parse(entries: &[String]) -> Self {
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
    pub(super) submitters: Option<Arc<Allowed>>,
    pub(super) create_rate: Option<Arc<CreateRate>>,
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
