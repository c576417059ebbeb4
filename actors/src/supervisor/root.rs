//! The root of a node's actor tree: one chain supervisor per served chain
//! (each the root of that chain's subtree: its tracking pools and its
//! SubmitterActors), linked to one [`NodeRoot`] actor that starts a chain's
//! supervisor again, with backoff, when it ends unasked (a panic in one of
//! its handlers). One chain's supervisor ending takes its own subtree with
//! it (ractor stops a dead actor's children) and nothing of another chain's.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, RwLock,
    },
    time::Instant,
};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::{
    restart_backoff::{ended_child, Restarts},
    Supervisor, SupervisorArgs, SupervisorMsg,
};

/// How long [`NodeRoot::adopt`] waits for the root to spawn a chain's
/// supervisor (its `pre_start` spawns the tracking pools).
const ADOPT_TIMEOUT_MS: u64 = 30_000;

/// The node's root actor, cheap to clone: the daemon starts one and every
/// chain's engine hangs its supervisor under it.
#[derive(Debug, Clone)]
pub struct NodeRoot {
    actor: ActorRef<RootMsg>,
}

/// One chain's subtree as its [`Engine`](crate::node::Engine) sees it: the
/// supervisor running now (a new one after a restart) and its restarts.
#[derive(Debug)]
pub(crate) struct ChainSubtree {
    supervisor: RwLock<ActorRef<SupervisorMsg>>,
    /// Set before the engine stops or kills its supervisor: no restart then.
    retired: AtomicBool,
    restarts: AtomicU32,
}

impl ChainSubtree {
    /// The chain's supervisor now.
    pub(crate) fn supervisor(&self) -> ActorRef<SupervisorMsg> {
        self.supervisor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The engine is stopping this subtree: the root lets it end.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    /// Times the root started the chain's supervisor again.
    pub(crate) fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }
}

/// Messages of the root.
#[derive(Debug)]
pub(crate) enum RootMsg {
    /// Spawn a chain's supervisor under the root and keep it running.
    Adopt(
        Box<SupervisorArgs>,
        RpcReplyPort<Result<Arc<ChainSubtree>, String>>,
    ),
    /// Backoff over: spawn the chain's supervisor again.
    Respawn(u64),
}

/// One adopted chain.
#[derive(Debug)]
struct Adopted {
    args: SupervisorArgs,
    subtree: Arc<ChainSubtree>,
    restarts: Restarts,
}

/// The root's state: the adopted chains, and which supervisor is whose.
#[derive(Debug, Default)]
struct RootState {
    chains: HashMap<u64, Adopted>,
    by_actor: HashMap<ActorId, u64>,
    next_key: u64,
}

/// The root actor.
#[derive(Debug, Default)]
struct RootActor;

impl NodeRoot {
    /// Starts the node's root actor.
    pub async fn start() -> Result<NodeRoot, ractor::SpawnErr> {
        let (actor, _) = Actor::spawn(None, RootActor, ()).await?;
        Ok(NodeRoot { actor })
    }

    /// Spawns a chain's supervisor under the root.
    pub(crate) async fn adopt(&self, args: SupervisorArgs) -> Result<Arc<ChainSubtree>, String> {
        ractor::call_t!(self.actor, RootMsg::Adopt, ADOPT_TIMEOUT_MS, Box::new(args))
            .map_err(|err| err.to_string())?
    }

    /// The root actor runs.
    pub fn alive(&self) -> bool {
        matches!(
            self.actor.get_status(),
            ractor::ActorStatus::Running | ractor::ActorStatus::Upgrading
        )
    }

    /// Stops the root (after its chains were stopped).
    pub fn stop(&self) {
        self.actor.stop(None);
    }
}

impl RootState {
    /// Spawns the supervisor of chain `key`, linked to the root.
    async fn spawn(&mut self, myself: &ActorRef<RootMsg>, key: u64) -> Result<(), String> {
        let Some(adopted) = self.chains.get(&key) else {
            return Ok(());
        };
        let (supervisor, _) =
            Actor::spawn_linked(None, Supervisor, adopted.args.clone(), myself.get_cell())
                .await
                .map_err(|err| err.to_string())?;
        self.by_actor.insert(supervisor.get_id(), key);
        *adopted
            .subtree
            .supervisor
            .write()
            .unwrap_or_else(|e| e.into_inner()) = supervisor;
        Ok(())
    }

    /// Schedules the next start of chain `key`'s supervisor, or forgets the
    /// chain when its engine retired it.
    fn schedule(&mut self, myself: &ActorRef<RootMsg>, key: u64, why: &str) {
        let Some(adopted) = self.chains.get_mut(&key) else {
            return;
        };
        if adopted.subtree.retired.load(Ordering::SeqCst) {
            self.chains.remove(&key);
            return;
        }
        let delay = adopted.restarts.next_delay(Instant::now());
        adopted
            .subtree
            .restarts
            .store(adopted.restarts.total, Ordering::Relaxed);
        let chain = crate::metrics::chain_label(adopted.args.shared.config.chain_id.into());
        metrics::counter!(crate::metrics::ACTOR_RESTARTS, "chain" => chain.clone(), "actor" => "chain_supervisor")
            .increment(1);
        tracing::error!(target: "txmgr::supervisor", %chain, reason = why, ?delay,
            "chain supervisor ended; starting it again with its subtree");
        myself.send_after(delay, move || RootMsg::Respawn(key));
    }
}

impl Actor for RootActor {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<RootMsg>,
        (): (),
    ) -> Result<RootState, ActorProcessingErr> {
        Ok(RootState::default())
    }

    async fn handle(
        &self,
        myself: ActorRef<RootMsg>,
        msg: RootMsg,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RootMsg::Adopt(args, reply) => {
                let (supervisor, _) =
                    match Actor::spawn_linked(None, Supervisor, (*args).clone(), myself.get_cell())
                        .await
                    {
                        Ok(spawned) => spawned,
                        Err(err) => {
                            let _ = reply.send(Err(err.to_string()));
                            return Ok(());
                        }
                    };
                let key = state.next_key;
                state.next_key += 1;
                let subtree = Arc::new(ChainSubtree {
                    supervisor: RwLock::new(supervisor.clone()),
                    retired: AtomicBool::new(false),
                    restarts: AtomicU32::new(0),
                });
                state.by_actor.insert(supervisor.get_id(), key);
                state.chains.insert(
                    key,
                    Adopted {
                        args: *args,
                        subtree: subtree.clone(),
                        restarts: Restarts::default(),
                    },
                );
                let _ = reply.send(Ok(subtree));
            }
            RootMsg::Respawn(key) => {
                let retired = state
                    .chains
                    .get(&key)
                    .is_none_or(|a| a.subtree.retired.load(Ordering::SeqCst));
                if retired {
                    state.chains.remove(&key);
                } else if let Err(err) = state.spawn(&myself, key).await {
                    state.schedule(&myself, key, &err);
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RootMsg>,
        event: SupervisionEvent,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, why)) = ended_child(event) else {
            return Ok(());
        };
        if let Some(key) = state.by_actor.remove(&cell.get_id()) {
            state.schedule(&myself, key, &why);
        }
        Ok(())
    }
}
