//! One live process per node id: the claim at start and the heartbeat.
//!
//! A process registers its node id before its engine starts. When another
//! process holds it with a fresh heartbeat, that may be a live twin (two
//! containers with one hostname, a copied configuration) or a predecessor
//! that has just crashed and is being restarted by systemd. The newcomer
//! watches the holder's heartbeat: if it moves, the holder is alive and the
//! newcomer refuses to start; if it goes stale (older than the liveness
//! window, 3 × `heartbeat_interval`), the holder is gone and the newcomer
//! takes the node id over. A restart after a crash therefore waits at most
//! the liveness window — less than the lease its predecessor held, which a
//! successor has to wait out anyway.

use std::time::Duration;

use sqlx::PgPool;
use tokio::time::Instant;

use crate::store::{
    node::{self, Heartbeat, NodeBuild, NodeHolder, Registration},
    LeaseOwner, StoreError,
};

/// Why this process may not (or may no longer) run under its node id.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another live process holds the node id.
    #[error(
        "node_id \"{node_id}\" is in use by a live process (instance {instance}, http {http_addr}, \
         last heartbeat {age_ms} ms ago): every txmgr process needs its own node_id — two \
         processes with one node_id would be one lease owner. Set a unique node_id in the \
         configuration (or TXMGR_NODE_ID); the default derives from the hostname, so give \
         processes that share a hostname explicit ids. A crashed process frees its node_id \
         once its heartbeat is older than {liveness:?}."
    )]
    InUse {
        /// The contested node id.
        node_id: String,
        /// The holder's instance id.
        instance: String,
        /// The holder's HTTP address (`unknown` when it recorded none).
        http_addr: String,
        /// Age of the holder's last heartbeat when the claim gave up.
        age_ms: u128,
        /// The liveness window.
        liveness: Duration,
    },
    /// Another process registered the node id after this one's heartbeat
    /// lapsed: this process must stop.
    #[error(
        "another process (instance {instance}, http {http_addr}) registered node_id \"{node_id}\" \
         after this process's heartbeat lapsed (frozen, or cut off from the database, for longer \
         than {liveness:?}); this process stops and its successor takes its leases over"
    )]
    Superseded {
        /// The node id.
        node_id: String,
        /// The successor's instance id.
        instance: String,
        /// The successor's HTTP address (`unknown` when it recorded none).
        http_addr: String,
        /// The liveness window.
        liveness: Duration,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ClaimError {
    fn in_use(owner: &LeaseOwner, holder: NodeHolder, liveness: Duration) -> Self {
        ClaimError::InUse {
            node_id: owner.node_id.to_string(),
            instance: holder.instance,
            http_addr: holder.http_addr.unwrap_or_else(|| "unknown".into()),
            age_ms: holder.heartbeat_age.as_millis(),
            liveness,
        }
    }
}

/// True when a second look at the holder of a node id proves it alive: its
/// heartbeat moved, or another process took the node id in between.
pub fn holder_alive(first: &NodeHolder, now: &NodeHolder) -> bool {
    now.instance != first.instance || now.heartbeat_at_us > first.heartbeat_at_us
}

/// Registers `owner` as the only live process with its node id; waits while
/// the current holder's heartbeat neither moves nor goes stale (checking
/// every `poll`). [`ClaimError::InUse`] when the holder proves alive.
pub async fn claim_node_id(
    pool: &PgPool,
    owner: &LeaseOwner,
    http_addr: &str,
    build: &NodeBuild,
    liveness: Duration,
    poll: Duration,
) -> Result<(), ClaimError> {
    // A holder whose heartbeat neither moves nor ages past the window can
    // only mean a stopped database clock; give up rather than wait forever.
    let deadline = Instant::now() + liveness.saturating_mul(2) + poll;
    let mut first: Option<NodeHolder> = None;
    loop {
        let holder = match node::register(pool, owner, http_addr, build, liveness).await? {
            Registration::Registered => return Ok(()),
            Registration::Held(holder) => holder,
        };
        match &first {
            None => {
                tracing::warn!(target: "txmgr::cluster", node_id = %owner.node_id,
                    holder = %holder.instance, heartbeat_age_ms = holder.heartbeat_age.as_millis(),
                    "node_id is registered by another process: waiting until its heartbeat moves (it is alive: refuse to start) or goes stale (it is gone: take over)");
                first = Some(holder);
            }
            Some(seen) if holder_alive(seen, &holder) || Instant::now() >= deadline => {
                return Err(ClaimError::in_use(owner, holder, liveness));
            }
            Some(_) => {}
        }
        tokio::time::sleep(poll).await;
    }
}

/// Heartbeats `owner` every `every` (re-registering it if an operator
/// removed the row) until another process has taken the node id — after
/// this one was frozen or cut off past the liveness window. Returns then:
/// the caller must stop this process (its leases are fenced already or
/// will be on expiry; its successor takes them over).
pub async fn heartbeat_until_superseded(
    pool: PgPool,
    owner: LeaseOwner,
    http_addr: String,
    build: NodeBuild,
    every: Duration,
) -> ClaimError {
    let liveness = every.saturating_mul(3);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let holder = match node::heartbeat(&pool, &owner).await {
            Ok(Heartbeat::Beat) => continue,
            Ok(Heartbeat::Missing) => {
                match node::register(&pool, &owner, &http_addr, &build, liveness).await {
                    Ok(Registration::Registered) => continue,
                    Ok(Registration::Held(holder)) => holder,
                    Err(err) => {
                        tracing::warn!(target: "txmgr::cluster", error = %err, "re-registering node failed");
                        continue;
                    }
                }
            }
            Ok(Heartbeat::Superseded(holder)) => holder,
            Err(err) => {
                tracing::warn!(target: "txmgr::cluster", error = %err, "node heartbeat failed");
                continue;
            }
        };
        tracing::error!(target: "txmgr::cluster", node_id = %owner.node_id, instance = %owner.instance,
            successor = %holder.instance, "another process registered this node_id after this one's heartbeat lapsed; stopping");
        return ClaimError::Superseded {
            node_id: owner.node_id.to_string(),
            instance: holder.instance,
            http_addr: holder.http_addr.unwrap_or_else(|| "unknown".into()),
            liveness,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(instance: &str, heartbeat_at_us: i64) -> NodeHolder {
        NodeHolder {
            instance: instance.into(),
            http_addr: None,
            heartbeat_at_us,
            heartbeat_age: Duration::ZERO,
        }
    }

    #[test]
    fn a_holder_is_alive_when_its_heartbeat_moves_or_another_took_over() {
        let seen = holder("a", 100);
        assert!(!holder_alive(&seen, &holder("a", 100)), "no proof yet");
        assert!(holder_alive(&seen, &holder("a", 101)), "it heartbeated");
        assert!(
            holder_alive(&seen, &holder("b", 50)),
            "a third process registered"
        );
    }
}
