//! Cluster membership and lease balancing (README "Running several nodes").
//!
//! Every node reads the live nodes (`txmgr_node` heartbeats, database time)
//! and computes, for every configured submitter, its preferred node
//! ([`assign`]). A leader that is not preferred hands its lease to the
//! preferred node once both have settled (hysteresis); a standby that is not
//! preferred waits a little longer than the preferred node before taking an
//! expired lease. A dead node's leases are taken over as before.
//!
//! A node id names one live process ([`claim_node_id`]): registration refuses
//! a second live process with the same id, and lease ownership is the node id
//! plus the process's instance id (`store::LeaseOwner`).

mod assign;
mod membership;
mod registration;

pub use assign::assign;
pub use membership::{refresh_loop, BalanceConfig, Membership};
pub use registration::{claim_node_id, heartbeat_until_superseded, holder_alive, ClaimError};
