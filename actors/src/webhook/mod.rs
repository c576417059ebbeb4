//! Push delivery of the completion feed to webhooks (README "Webhooks").
//!
//! ```text
//! Webhooks (handle) ─► WebhookSupervisor ─┬─ WebhookActor "ops"     (lease ops: deliver)
//!        apply / wake / stop              ├─ WebhookActor "billing" (lease elsewhere: wait)
//!                                         └─ … restarted with backoff when one fails
//! ```
//!
//! Every node runs one actor per configured webhook; each webhook's lease
//! (same rules as submitter leases, balanced over live nodes) decides which
//! node delivers. Delivery is at least once, in order per submitter, never
//! skipping: the cursor moves only past events delivered or dead-lettered.
//! The holder delivers every chain's events, whatever chains its node
//! serves: a feed row needs no chain RPC, and the cursor is one for the feed.

mod actor;
mod attempt;
mod settings;
pub mod signature;
mod window;

use std::{collections::HashMap, sync::Arc, time::Duration};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use sqlx::PgPool;

pub use actor::{AttemptReport, Lane, WebhookActor, WebhookArgs, WebhookMsg, WebhookState};
pub use attempt::{ATTEMPT_HEADER, DELIVERY_HEADER, EVENT_HEADER};
pub use settings::{is_valid_name, WebhookSecret, WebhookSettings};
pub use signature::SIGNATURE_HEADER;

use crate::{
    cluster::Membership,
    domain::ChainId,
    store::LeaseOwner,
    submitter::LeaseTiming,
    supervisor::restart_backoff::{ended_child, Restarts},
};

/// What every webhook actor of a node shares.
#[derive(Debug)]
pub struct WebhookEnv {
    /// The database.
    pub pool: PgPool,
    /// The chain the webhook rows (cursor, lease, dead letters) are keyed
    /// by: the one that already keys them, else the first chain at start.
    pub chain_id: ChainId,
    /// This process (the lease owner).
    pub owner: LeaseOwner,
    /// Lease length, renewal and skew: the submitters' settings.
    pub lease: LeaseTiming,
    /// Live nodes, for balancing the webhooks over them.
    pub membership: Arc<Membership>,
    /// How often a holder reads the feed when not woken (held-back rows,
    /// missed notifications) and a non-holder looks at the lease.
    pub tick: Duration,
}

/// Messages of the [`WebhookSupervisor`].
#[derive(Debug)]
pub enum WebhookSupervisorMsg {
    /// Run exactly these webhooks (start, reconfigure, stop).
    Apply(Vec<WebhookSettings>),
    /// Wake every webhook (the feed has new rows).
    Wake,
    /// Start a failed webhook actor again.
    Respawn(String),
}

/// Parent of the webhook actors: starts, reconfigures, stops and restarts them.
#[derive(Debug)]
pub struct WebhookSupervisor;

/// One running webhook.
#[derive(Debug)]
struct Child {
    actor: ActorRef<WebhookMsg>,
    settings: Arc<WebhookSettings>,
}

/// The supervisor's state.
#[derive(Debug)]
pub struct WebhookSupervisorState {
    env: Arc<WebhookEnv>,
    children: HashMap<String, Child>,
    by_id: HashMap<ActorId, String>,
    /// Latest settings of each configured webhook (for respawns).
    configured: HashMap<String, Arc<WebhookSettings>>,
    restarts: HashMap<String, Restarts>,
}

impl WebhookSupervisorState {
    async fn spawn(
        &mut self,
        myself: &ActorRef<WebhookSupervisorMsg>,
        settings: Arc<WebhookSettings>,
    ) {
        let name = settings.name.clone();
        let args = WebhookArgs {
            settings: settings.clone(),
            env: self.env.clone(),
        };
        match Actor::spawn_linked(None, WebhookActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.by_id.insert(actor.get_id(), name.clone());
                self.children.insert(name, Child { actor, settings });
            }
            Err(err) => {
                let delay = self
                    .restarts
                    .entry(name.clone())
                    .or_default()
                    .next_delay(std::time::Instant::now());
                tracing::error!(target: "txmgr::webhook", webhook = %name, error = %err, ?delay, "starting the webhook actor failed");
                myself.send_after(delay, move || WebhookSupervisorMsg::Respawn(name));
            }
        }
    }
}

impl Actor for WebhookSupervisor {
    type Msg = WebhookSupervisorMsg;
    type State = WebhookSupervisorState;
    type Arguments = Arc<WebhookEnv>;

    async fn pre_start(
        &self,
        _myself: ActorRef<WebhookSupervisorMsg>,
        env: Arc<WebhookEnv>,
    ) -> Result<WebhookSupervisorState, ActorProcessingErr> {
        Ok(WebhookSupervisorState {
            env,
            children: HashMap::new(),
            by_id: HashMap::new(),
            configured: HashMap::new(),
            restarts: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<WebhookSupervisorMsg>,
        message: WebhookSupervisorMsg,
        state: &mut WebhookSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WebhookSupervisorMsg::Apply(list) => {
                let wanted: HashMap<String, Arc<WebhookSettings>> = list
                    .into_iter()
                    .map(|s| (s.name.clone(), Arc::new(s)))
                    .collect();
                let gone: Vec<String> = state
                    .children
                    .keys()
                    .filter(|name| !wanted.contains_key(*name))
                    .cloned()
                    .collect();
                for name in gone {
                    if let Some(child) = state.children.remove(&name) {
                        state.by_id.remove(&child.actor.get_id());
                        child.actor.stop(Some("removed".into()));
                    }
                }
                for (name, settings) in &wanted {
                    match state.children.get_mut(name) {
                        Some(child) if child.settings != *settings => {
                            child.settings = settings.clone();
                            let _ = child
                                .actor
                                .send_message(WebhookMsg::Reconfigure(settings.clone()));
                        }
                        Some(_) => {}
                        None => state.spawn(&myself, settings.clone()).await,
                    }
                }
                state.configured = wanted;
            }
            WebhookSupervisorMsg::Wake => {
                for child in state.children.values() {
                    let _ = child.actor.send_message(WebhookMsg::Wake);
                }
            }
            WebhookSupervisorMsg::Respawn(name) => {
                if let Some(settings) = state.configured.get(&name).cloned() {
                    if !state.children.contains_key(&name) {
                        state.spawn(&myself, settings).await;
                    }
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<WebhookSupervisorMsg>,
        event: SupervisionEvent,
        state: &mut WebhookSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, why)) = ended_child(event) else {
            return Ok(());
        };
        let Some(name) = state.by_id.remove(&cell.get_id()) else {
            return Ok(());
        };
        state.children.remove(&name);
        if !state.configured.contains_key(&name) {
            return Ok(());
        }
        let delay = state
            .restarts
            .entry(name.clone())
            .or_default()
            .next_delay(std::time::Instant::now());
        tracing::error!(target: "txmgr::webhook", webhook = %name, reason = %why, ?delay, "webhook actor ended; restarting it");
        myself.send_after(delay, move || WebhookSupervisorMsg::Respawn(name));
        Ok(())
    }
}

/// The daemon's handle on the node's webhooks.
#[derive(Debug, Clone)]
pub struct Webhooks {
    supervisor: ActorRef<WebhookSupervisorMsg>,
    /// The names configured now (the gauges report only these).
    configured: Arc<std::sync::RwLock<Vec<String>>>,
    /// The chain id the webhook rows are keyed by.
    key_chain: ChainId,
}

impl Webhooks {
    /// Starts the webhook actors for `settings`.
    pub async fn start(
        env: WebhookEnv,
        settings: Vec<WebhookSettings>,
    ) -> Result<Webhooks, ractor::SpawnErr> {
        let key_chain = env.chain_id;
        let (supervisor, _) = Actor::spawn(None, WebhookSupervisor, Arc::new(env)).await?;
        let webhooks = Webhooks {
            supervisor,
            configured: Arc::default(),
            key_chain,
        };
        webhooks.apply(settings);
        Ok(webhooks)
    }

    /// Runs exactly `settings` from now on (reload).
    pub fn apply(&self, settings: Vec<WebhookSettings>) {
        if let Ok(mut names) = self.configured.write() {
            *names = settings.iter().map(|s| s.name.clone()).collect();
        }
        let _ = self
            .supervisor
            .send_message(WebhookSupervisorMsg::Apply(settings));
    }

    /// The chain id the webhook rows (cursor, lease, dead letters) are
    /// keyed by.
    pub fn key_chain(&self) -> ChainId {
        self.key_chain
    }

    /// The names of the webhooks configured now.
    pub fn configured(&self) -> Vec<String> {
        self.configured
            .read()
            .map(|names| names.clone())
            .unwrap_or_default()
    }

    /// The feed has new rows.
    pub fn wake(&self) {
        let _ = self.supervisor.send_message(WebhookSupervisorMsg::Wake);
    }

    /// Crashes every webhook actor (tests): nothing is committed or released.
    pub fn kill(&self) {
        for child in self.supervisor.get_children() {
            child.unlink(self.supervisor.get_cell());
            child.kill();
        }
        self.supervisor.kill();
    }

    /// Stops every webhook actor (each commits what it can and releases its
    /// lease) and waits up to `timeout`.
    pub async fn shutdown(&self, timeout: Duration) {
        // An empty list stops every child as removed, so none is restarted.
        self.apply(Vec::new());
        let _ = tokio::time::timeout(timeout, async {
            while !self.supervisor.get_children().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        self.supervisor.stop(None);
    }
}
