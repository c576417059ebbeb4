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
    /// the chain (a healthy RPC endpoint) once — so `/readyz` has an answer
    /// from the first request on — and starts the refresher that checks
    /// again every `interval`.
    pub async fn start(
        pool: PgPool,
        chain: Option<Arc<dyn ChainClient>>,
        chain_id: u64,
        interval: Duration,
    ) -> Self {
        let first = check(&pool, chain.as_deref(), chain_id).await;
        let (sender, latest) = watch::channel(first);
        let refresher = tokio::spawn(refresh_loop(pool, chain, chain_id, interval, sender));
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

async fn refresh_loop(
    pool: PgPool,
    chain: Option<Arc<dyn ChainClient>>,
    chain_id: u64,
    interval: Duration,
    sender: watch::Sender<Checked>,
) {
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let checked = check(&pool, chain.as_deref(), chain_id).await;
        if sender.send(checked).is_err() {
            return;
        }
    }
}

/// One round: the database and the chain, concurrently.
async fn check(pool: &PgPool, chain: Option<&dyn ChainClient>, chain_id: u64) -> Checked {
    let at = Instant::now();
    let (mut reasons, chain_reasons) =
        tokio::join!(database_readiness(pool), chain_readiness(chain, chain_id));
    reasons.extend(chain_reasons);
    Checked { at, reasons }
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

/// Ready while at least one RPC endpoint is healthy, from the health the
/// endpoint monitor keeps; clients without endpoints (test doubles) are
/// asked for their chain id. No chain port: nothing to check.
async fn chain_readiness(chain: Option<&dyn ChainClient>, chain_id: u64) -> Vec<String> {
    let Some(chain) = chain else {
        return Vec::new();
    };
    let endpoints = chain.endpoint_status();
    if !endpoints.is_empty() {
        if endpoints.iter().any(|e| e.healthy) {
            return Vec::new();
        }
        let why: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{} {}", e.name, e.reason.as_deref().unwrap_or("unhealthy")))
            .collect();
        return vec![format!(
            "chain: no healthy RPC endpoint ({})",
            why.join(", ")
        )];
    }
    match tokio::time::timeout(PROBE_TIMEOUT, chain.chain_id()).await {
        Ok(Ok(id)) if id == chain_id => Vec::new(),
        Ok(Ok(id)) => vec![format!(
            "chain: the RPC endpoint serves chain {id}, configured {chain_id}"
        )],
        Ok(Err(err)) => {
            tracing::warn!(target: "http", error = %err, "readiness: chain check failed");
            vec!["chain: RPC endpoint unreachable".to_owned()]
        }
        Err(_) => vec![format!(
            "chain: no answer within {}",
            humantime::format_duration(PROBE_TIMEOUT)
        )],
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
        };
        assert!(verdict(&ready, now, Duration::from_secs(5)).is_empty());
        let down = Checked {
            at: now,
            reasons: vec!["database: unreachable or not migrated".to_owned()],
        };
        assert_eq!(verdict(&down, now, Duration::from_secs(5)), down.reasons);
    }

    #[test]
    fn a_stale_result_is_not_ready() {
        let now = Instant::now();
        let old = Checked {
            at: now,
            reasons: Vec::new(),
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
