//! Starting the node's webhook actors and waking them when the feed grows.

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;
use txmgr_actors::{
    domain::ChainId,
    node::Engine,
    store::{webhooks, LeaseOwner},
    submitter::LeaseTiming,
    webhook::{WebhookEnv, Webhooks},
};

use super::ChainRuntime;
use crate::{config::Config, http::CompletionNotifier};

/// How often a webhook holder re-reads the feed when not woken.
const WEBHOOK_TICK: Duration = Duration::from_millis(250);

/// Starts one actor per `[[webhooks]]` entry (secrets read now): each
/// delivers the events of every chain — whatever chains this node serves —
/// its rows keyed by the chain that already keys them
/// ([`webhooks::keyed_chain`]), else the first chain.
pub async fn start_chain_webhooks(
    config: &Config,
    owner: &LeaseOwner,
    pool: PgPool,
    chains: &[ChainRuntime],
) -> anyhow::Result<Webhooks> {
    let first = chains.first().context("chains: no chain started")?;
    let ids = chains.iter().map(|c| ChainId::from(c.chain_id)).collect();
    start_webhooks_over(config, owner, pool, &first.engine, ids).await
}

async fn start_webhooks_over(
    config: &Config,
    owner: &LeaseOwner,
    pool: PgPool,
    engine: &Engine,
    served: Vec<ChainId>,
) -> anyhow::Result<Webhooks> {
    let settings = config.resolved_webhooks()?;
    let first = *served.first().context("chains: no chain")?;
    // The rows already there keep their key, whatever chains were added,
    // removed or renamed since; a first start keys them by the first chain.
    let names: Vec<String> = settings.iter().map(|s| s.name.clone()).collect();
    let home = webhooks::keyed_chain(&pool, &served, &names)
        .await
        .context("reading the webhooks' rows")?
        .unwrap_or(first);
    let env = WebhookEnv {
        pool,
        chain_id: home,
        owner: owner.clone(),
        lease: LeaseTiming {
            duration: config.lease.duration,
            renew_interval: config.lease.renew_interval,
            clock_skew: config.lease.clock_skew_allowance,
            idle_release_after: config.lease.idle_release_after,
        },
        membership: engine.membership_handle(),
        tick: WEBHOOK_TICK,
    };
    Ok(Webhooks::start(env, settings).await?)
}

/// Wakes the webhooks at every completion commit (the notifier's LISTEN);
/// their own tick covers a lost connection.
pub fn wake_on_completions(
    notifier: &CompletionNotifier,
    webhooks: Webhooks,
) -> tokio::task::JoinHandle<()> {
    notifier.on_each_completion(move || webhooks.wake())
}
