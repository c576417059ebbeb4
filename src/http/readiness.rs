//! The state `GET /readyz` answers from, refreshed in the background.
//!
//! ```text
//! start ── first check ──► refresher task ── every http.readiness_interval ──► checks ──► watch
//! GET /readyz ──► latest result (no query, no RPC) ──► too old? not ready
//! ```
//!
//! A probe that hits `/readyz` every second on every node must not cost a
//! database query and an RPC call each time, nor wait behind a slow
//! dependency: the checks run on a timer, each bounded by [`PROBE_TIMEOUT`],
//! and `/readyz` reads the last result. A result older than
//! [`Readiness::max_age`] (the refresher is stuck or gone) is reported as not
//! ready rather than trusted.

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::{sync::watch, task::JoinHandle, time::Instant};
use txmgr_actors::{chain::ChainClient, store::unapplied_migrations};

use super::ServedChains;

/// Budget of each readiness check, so a hanging dependency is reported
/// rather than waited for.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One round of checks.
#[derive(Debug, Clone)]
struct Checked {
    /// When the round started (its result is at least this old).
    at: Instant,
    /// Why not ready; empty when ready.
    reasons: Vec<String>,
    /// Each chain's state.
    chains: Vec<ChainState>,
}

/// One chain's state as `/readyz` lists it: a chain out of service shows
/// here, and takes the node out of service only when no chain is left.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ChainState {
    /// The chain's name.
    pub chain: String,
    /// The chain's id.
    pub chain_id: u64,
    /// At least one of its RPC endpoints is healthy.
    pub healthy: bool,
    /// Why not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A chain whose readiness is checked: its name, id and RPC endpoints.
#[derive(Clone)]
pub struct CheckedChain {
    /// The chain's name.
    pub name: String,
    /// The chain's id.
    pub chain_id: u64,
    /// Its endpoints.
    pub client: Arc<dyn ChainClient>,
}

/// The readiness of this node as last checked. One per process; cheap to
/// clone; the refresher stops when the last clone is dropped.
#[derive(Clone)]
pub struct Readiness {
    inner: Arc<ReadinessInner>,
}

struct ReadinessInner {
    latest: watch::Receiver<Checked>,
    refresher: JoinHandle<()>,
    max_age: Duration,
}

impl Drop for ReadinessInner {
    fn drop(&mut self) {
        self.refresher.abort();
    }
}

impl Readiness {
    /// Checks the database (reachable, every embedded migration applied) and
    /// each chain (a healthy RPC endpoint) once — so `/readyz` has an answer
    /// from the first request on — and starts the refresher that checks
    /// again every `interval`. Ready while the database is and at least one
    /// chain is (none configured: the database alone).
    /// The chains checked are those `chains` serves at each round (a reload
    /// may add or remove one).
    pub async fn start(pool: PgPool, chains: ServedChains, interval: Duration) -> Self {
        let first = check(&pool, &checked_chains(&chains)).await;
        let (sender, latest) = watch::channel(first);
        let refresher = tokio::spawn(refresh_loop(pool, chains, interval, sender));
        Self {
            inner: Arc::new(ReadinessInner {
                latest,
                refresher,
                max_age: Self::max_age(interval),
            }),
        }
    }

    /// How old a result may be and still count: three refresh periods plus
    /// one round's worst case.
    pub fn max_age(interval: Duration) -> Duration {
        interval.saturating_mul(3) + PROBE_TIMEOUT
    }

    /// Why this node is not ready now; empty when it is.
    pub fn reasons(&self) -> Vec<String> {
        verdict(
            &self.inner.latest.borrow(),
            Instant::now(),
            self.inner.max_age,
        )
    }

    /// Each chain's state as last checked.
    pub fn chains(&self) -> Vec<ChainState> {
        self.inner.latest.borrow().chains.clone()
    }
}

/// The answer from the last result at `now`: its reasons, or why it cannot
/// be trusted.
fn verdict(latest: &Checked, now: Instant, max_age: Duration) -> Vec<String> {
    let age = now.saturating_duration_since(latest.at);
    if age > max_age {
        return vec![format!(
            "readiness: last checked {}s ago (checks stalled)",
            age.as_secs()
        )];
    }
    latest.reasons.clone()
}

/// The served chains that have RPC endpoints to check.
fn checked_chains(chains: &ServedChains) -> Vec<CheckedChain> {
    chains
        .list()
        .iter()
        .filter_map(|chain| {
            Some(CheckedChain {
                name: chain.name.clone(),
                chain_id: chain.chain_id.into(),
                client: chain.client.clone()?,
            })
        })
        .collect()
}

async fn refresh_loop(
    pool: PgPool,
    chains: ServedChains,
    interval: Duration,
    sender: watch::Sender<Checked>,
) {
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let checked = check(&pool, &checked_chains(&chains)).await;
        if sender.send(checked).is_err() {
            return;
        }
    }
}

/// One round: the database and every chain, concurrently.
async fn check(pool: &PgPool, chains: &[CheckedChain]) -> Checked {
    let at = Instant::now();
    let each_chain = futures::future::join_all(chains.iter().map(|chain| async move {
        let why = chain_readiness(&*chain.client, chain.chain_id).await;
        metrics::gauge!(txmgr_actors::metrics::CHAIN_HEALTHY, "chain" => chain.name.clone())
            .set(if why.is_none() { 1.0 } else { 0.0 });
        ChainState {
            chain: chain.name.clone(),
            chain_id: chain.chain_id,
            healthy: why.is_none(),
            reason: why,
        }
    }));
    let (mut reasons, chains) = tokio::join!(database_readiness(pool), each_chain);
    metrics::gauge!(txmgr_actors::metrics::DATABASE_HEALTHY).set(if reasons.is_empty() {
        1.0
    } else {
        0.0
    });
    if !chains.is_empty() && !chains.iter().any(|c| c.healthy) {
        reasons.extend(chains.iter().map(|c| {
            let why = c.reason.as_deref().unwrap_or("unhealthy");
            if chains.len() == 1 {
                format!("chain: {why}")
            } else {
                format!("chain {}: {why}", c.chain)
            }
        }));
    }
    Checked {
        at,
        reasons,
        chains,
    }
}

/// Reachable, and every embedded migration applied.
async fn database_readiness(pool: &PgPool) -> Vec<String> {
    let unapplied = tokio::time::timeout(PROBE_TIMEOUT, unapplied_migrations(pool)).await;
    match unapplied {
        Ok(Ok(missing)) => {
            if missing.is_empty() {
                Vec::new()
            } else {
                vec![format!("database: migrations not applied: {missing:?}")]
            }
        }
        Ok(Err(err)) => {
            tracing::warn!(target: "http", error = %err, "readiness: database check failed");
            vec!["database: unreachable or not migrated".to_owned()]
        }
        Err(_) => vec![format!(
            "database: no answer within {}",
            humantime::format_duration(PROBE_TIMEOUT)
        )],
    }
}

/// Why the chain is out of service (`None`: at least one RPC endpoint is
/// healthy), from the health the endpoint monitor keeps; clients without
/// endpoints (test doubles) are asked for their chain id.
async fn chain_readiness(chain: &dyn ChainClient, chain_id: u64) -> Option<String> {
    // Send-only endpoints are never read from: they do not keep a chain in
    // service.
    let endpoints: Vec<_> = chain
        .endpoint_status()
        .into_iter()
        .filter(|e| !e.send_only)
        .collect();
    if !endpoints.is_empty() {
        if endpoints.iter().any(|e| e.healthy) {
            return None;
        }
        let why: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{} {}", e.name, e.reason.as_deref().unwrap_or("unhealthy")))
            .collect();
        return Some(format!("no healthy RPC endpoint ({})", why.join(", ")));
    }
    match tokio::time::timeout(PROBE_TIMEOUT, chain.chain_id()).await {
        Ok(Ok(id)) if id == chain_id => None,
        Ok(Ok(id)) => Some(format!(
            "the RPC endpoint serves chain {id}, configured {chain_id}"
        )),
        Ok(Err(err)) => {
            tracing::warn!(target: "http", error = %err, "readiness: chain check failed");
            Some("RPC endpoint unreachable".to_owned())
        }
        Err(_) => Some(format!(
            "no answer within {}",
            humantime::format_duration(PROBE_TIMEOUT)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_result_is_answered_as_it_is() {
        let now = Instant::now();
        let ready = Checked {
            at: now,
            reasons: Vec::new(),
            chains: Vec::new(),
        };
        assert!(verdict(&ready, now, Duration::from_secs(5)).is_empty());
        let down = Checked {
            at: now,
            reasons: vec!["database: unreachable or not migrated".to_owned()],
            chains: Vec::new(),
        };
        assert_eq!(verdict(&down, now, Duration::from_secs(5)), down.reasons);
    }

    #[test]
    fn a_stale_result_is_not_ready() {
        let now = Instant::now();
        let old = Checked {
            at: now,
            reasons: Vec::new(),
            chains: Vec::new(),
        };
        let later = now + Duration::from_secs(6);
        let reasons = verdict(&old, later, Duration::from_secs(5));
        assert_eq!(reasons.len(), 1);
        assert!(reasons[0].contains("stalled"), "{reasons:?}");
    }

    #[test]
    fn the_staleness_bound_covers_a_slow_round() {
        assert_eq!(
            Readiness::max_age(Duration::from_secs(1)),
            Duration::from_secs(5)
        );
    }
}
