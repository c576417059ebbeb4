//! The spend ledger's retention (README "Guardrails"): a node registers the
//! longest spend window it runs (`store::spend_retention`) at start and
//! around every reload, and prunes, every round, the ledger rows older than
//! the longest window any node registered. Independent of `feed.retain`:
//! keeping the feed forever (`0s`) still prunes the ledger, and a short
//! feed retention never shortens a window.

use std::time::Duration;

use sqlx::PgPool;
use txmgr_actors::store::spend_retention;

use crate::config::{Config, ConfigError};

/// Ledger batches per round at most (each looks at 1,000 rows).
const MAX_BATCHES: u32 = 100;

/// The longest `policy.spend_limit.window` of any submitter `config` runs,
/// on any chain (zero: no spend limit).
pub(crate) fn longest_spend_window(config: &Config) -> Duration {
    config
        .chains()
        .iter()
        .flat_map(|chain| config.resolved_submitters_on(chain.name))
        .filter_map(|s| s.settings.policy.spend_limit.map(|limit| limit.window))
        .max()
        .unwrap_or(Duration::ZERO)
}

/// Registers `config`'s longest spend window as this node's.
pub(crate) async fn register(
    pool: &PgPool,
    config: &Config,
) -> Result<(), txmgr_actors::store::StoreError> {
    spend_retention::register(pool, &config.node_id, longest_spend_window(config)).await
}

/// A reload's change of this node's longest window: [`HorizonChange::widen`]
/// before the running actors switch to the new settings registers the
/// longer of both, [`HorizonChange::settle`] after registers the new one.
pub(crate) struct HorizonChange {
    node_id: String,
    old: Duration,
    new: Duration,
}

impl HorizonChange {
    /// From the running configuration to `new`.
    pub(crate) fn between(running: &Config, new: &Config) -> Self {
        Self {
            node_id: new.node_id.clone(),
            old: longest_spend_window(running),
            new: longest_spend_window(new),
        }
    }

    /// Registers the longer window; a failure rejects the reload (nothing
    /// is applied yet).
    pub(crate) async fn widen(&self, pool: &PgPool) -> Result<(), ConfigError> {
        spend_retention::register(pool, &self.node_id, self.old.max(self.new))
            .await
            .map_err(|err| {
                ConfigError::single(
                    "database",
                    format!("cannot register the spend ledger's horizon: {err}"),
                )
            })
    }

    /// Registers the new window when it is shorter. A failure leaves the
    /// longer one registered: rows kept longer, none lost.
    pub(crate) async fn settle(&self, pool: &PgPool) {
        if self.new >= self.old {
            return;
        }
        if let Err(err) = spend_retention::register(pool, &self.node_id, self.new).await {
            tracing::warn!(target: "txmgr::spend", error = %err, "spend ledger horizon not shortened");
        }
    }
}

/// Prunes the spend ledger every `every` (the first round at once), a
/// bounded number of batches per round. Every node runs it: the deletes
/// are idempotent.
pub(crate) async fn ledger_retention_loop(pool: PgPool, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match spend_retention::prune(&pool, MAX_BATCHES).await {
            Ok(0) => {}
            Ok(rows) => {
                tracing::info!(target: "txmgr::spend", rows, "spend ledger retention: old rows deleted")
            }
            Err(err) => {
                tracing::warn!(target: "txmgr::spend", error = %err, "spend ledger retention round failed")
            }
        }
    }
}
