//! This process's node registration: its node id is claimed before the
//! engine starts (a second live process with the same id stops there, before
//! it touches a lease), heartbeated while it runs, removed on a graceful stop.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use sqlx::PgPool;
use tokio::task::{AbortHandle, JoinHandle};
use txmgr_actors::{
    cluster::{claim_node_id, heartbeat_until_superseded, ClaimError},
    store::{self, LeaseOwner},
};

use crate::config::Config;

/// The registered node id of this process and its heartbeat.
pub(crate) struct NodeRegistration {
    owner: LeaseOwner,
    pool: PgPool,
    heartbeat: Option<JoinHandle<()>>,
    stop_heartbeat: AbortHandle,
    superseded: Arc<OnceLock<ClaimError>>,
}

impl NodeRegistration {
    /// Claims `config.node_id` for a new instance (waiting out a crashed
    /// predecessor, refusing a live twin) and starts heartbeating at once,
    /// so a slow engine start cannot make the registration look stale.
    pub(crate) async fn claim(
        pool: &PgPool,
        config: &Config,
        http_addr: &str,
    ) -> anyhow::Result<NodeRegistration> {
        let owner = LeaseOwner::for_this_process(config.node_id.as_str());
        let every = config.node.heartbeat_interval;
        claim_node_id(
            pool,
            &owner,
            http_addr,
            &crate::build_info::node_build(),
            config.node.liveness(),
            claim_poll(every),
        )
        .await?;
        let superseded = Arc::new(OnceLock::new());
        let beat = heartbeat_until_superseded(
            pool.clone(),
            owner.clone(),
            http_addr.to_owned(),
            crate::build_info::node_build(),
            every,
        );
        let heartbeat = tokio::spawn({
            let superseded = superseded.clone();
            async move {
                let _ = superseded.set(beat.await);
            }
        });
        Ok(NodeRegistration {
            owner,
            pool: pool.clone(),
            stop_heartbeat: heartbeat.abort_handle(),
            heartbeat: Some(heartbeat),
            superseded,
        })
    }

    /// This process's lease owner identity.
    pub(crate) fn owner(&self) -> &LeaseOwner {
        &self.owner
    }

    /// Resolves when another process has taken the node id over (this one
    /// was frozen or cut off past the liveness window): the node must stop.
    /// Pending forever when called a second time.
    pub(crate) fn superseded(&mut self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let heartbeat = self.heartbeat.take();
        async move {
            match heartbeat {
                Some(heartbeat) => {
                    let _ = heartbeat.await;
                }
                None => std::future::pending().await,
            }
        }
    }

    /// Stops heartbeating and removes the row (only this instance's: a
    /// successor's row stays). The error when this process was superseded.
    pub(crate) async fn leave(self) -> anyhow::Result<()> {
        self.stop_heartbeat.abort();
        store::node::deregister(&self.pool, &self.owner).await?;
        match self.superseded.get() {
            Some(err) => Err(anyhow::anyhow!("{err}")),
            None => Ok(()),
        }
    }
}

/// How often a starting process looks at the heartbeat of another process
/// holding its node id: a few looks per heartbeat, so a live holder is
/// recognised within about one heartbeat interval.
fn claim_poll(heartbeat_interval: Duration) -> Duration {
    (heartbeat_interval / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}
