//! The Supervisor: the root of one chain's subtree (one per chain, each a
//! child of the node's [`NodeRoot`]).
//!
//! The supervisor spawns SubmitterActors lazily (first create, a `NOTIFY`
//! from another node, or discovery of unfinished work whose lease is free),
//! restarts a failed or fenced one with exponential backoff, and gives up on
//! it (role `failed`) after too many restarts in a window. It also spawns
//! the tracking actors (head watcher, receipt, finality and resubmit pools)
//! linked to itself and restarts a failed one with a bounded backoff
//! (`tracker_tree`). It overrides ractor's default supervision, which would
//! stop the supervisor with its child.
//!
//! The daemon does not talk to it directly: it holds the
//! [`Engine`](crate::node::Engine) facade, which starts the supervisor and
//! shares [`EngineShared`] with it.

mod actor;
mod discovery;
pub(crate) mod restart_backoff;
mod root;
mod shared;
mod tracker_tree;

pub use actor::{Supervisor, SupervisorArgs, SupervisorMsg};
pub(crate) use root::ChainSubtree;
pub use root::NodeRoot;
pub use shared::{EngineConfig, EngineShared, NodeServices, SubmitterSpec};
pub use tracker_tree::{TrackerActorSnapshot, TrackerChild, TrackerTree};
