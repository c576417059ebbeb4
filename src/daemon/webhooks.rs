//! Starting the node's webhook actors and waking them when the feed grows.

use std::time::Duration;

use sqlx::PgPool;
use txmgr_actors::{
    node::Engine,
    store::LeaseOwner,
    submitter::LeaseTiming,
    webhook::{WebhookEnv, Webhooks},
};

use crate::{config::Config, http::CompletionNotifier};

/// How often a webhook holder re-reads the feed when not woken.
const WEBHOOK_TICK: Duration = Duration::from_millis(250);

/// Starts one actor per `[[webhooks]]` entry (secrets read now).
pub async fn start_webhooks(
    config: &Config,
    owner: &LeaseOwner,
    pool: PgPool,
    engine: &Engine,
) -> anyhow::Result<Webhooks> {
    let settings = config.resolved_webhooks()?;
    let env = WebhookEnv {
        pool,
        chain_id: config.chain.chain_id.into(),
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
