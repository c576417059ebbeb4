//! The JSON shapes of `/v1/ops/*` (also the OpenAPI schemas).

use serde::{Deserialize, Serialize};

/// One SubmitterActor in `GET /v1/ops/actors`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ActorView {
    /// The chain's name.
    pub chain: String,
    /// The chain's id.
    pub chain_id: u64,
    /// Lower-case `0x` address.
    pub submitter: String,
    /// idle | leader | standby | protected | stopping | failed.
    pub role: &'static str,
    /// Fencing token of the held lease (0 when not leader).
    pub fencing_token: i64,
    /// Milliseconds of lease left by the local clock, while leader.
    pub lease_time_left_ms: Option<u64>,
    /// Messages queued for the actor.
    pub mailbox_depth: usize,
    /// Creates waiting to be persisted.
    pub ingress_depth: usize,
    /// QUEUED intents (database).
    pub queued: i64,
    /// ALLOCATED / TRACKING / STUCK intents (database).
    pub in_flight: i64,
    /// STUCK intents (database).
    pub stuck: i64,
    /// Age in milliseconds of the oldest open intent.
    pub oldest_pending_age_ms: Option<i64>,
    /// Supervisor restarts.
    pub restarts: u32,
    /// Last error reported by the actor or the supervisor.
    pub last_error: Option<String>,
    /// PROTECT reason, when protected.
    pub protect_reason: Option<String>,
    /// Sending paused (README "Guardrails"), when it is.
    pub paused: Option<PausedView>,
    /// Its spend limit's window now, when it has a `spend_limit`.
    pub spend: Option<SpendView>,
    /// The lowest unmined nonce is STUCK, so every later nonce waits behind
    /// it on chain (reported by the leader; false on other nodes).
    pub head_of_line_blocked: bool,
    /// An actor runs for this submitter here.
    pub running: bool,
    /// Removed from the configuration; draining.
    pub draining: bool,
    /// Current `max_in_flight`.
    pub max_in_flight: u32,
    /// Last balance read by the leader on this node, in wei (decimal); null
    /// where no leader with `min_balance` runs.
    #[schema(pattern = "^[0-9]+$")]
    pub balance_wei: Option<String>,
    /// The configured `min_balance`, in wei (decimal); null when not monitored.
    #[schema(pattern = "^[0-9]+$")]
    pub min_balance_wei: Option<String>,
    /// The balance read was below `min_balance`.
    pub funds_low: Option<bool>,
    /// Where the submitter's key lives: `env`, `keystore`, `remote` or `aws_kms`.
    pub signer_kind: &'static str,
}

/// A submitter's pause in `GET /v1/ops/actors`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PausedView {
    /// `api` (an operator's pause, cluster-wide) or `config` (`paused = true`).
    #[schema(pattern = "^(api|config)$")]
    pub source: &'static str,
    /// Why.
    pub reason: String,
    /// Re-broadcasts and fee bumps of in-flight intents stop too.
    pub halt_resubmits: bool,
    /// Who paused it (the token's name; `config` for the configuration).
    pub paused_by: String,
    /// Creates are accepted meanwhile (they wait QUEUED); false: 423 `paused`.
    pub accepts_creates: bool,
}

/// A submitter's spend window in `GET /v1/ops/actors` (README "Guardrails").
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SpendView {
    /// `spend_limit.value`, wei (decimal); absent when only fees are limited.
    #[schema(pattern = "^[0-9]+$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_wei: Option<String>,
    /// `spend_limit.window`, e.g. `24h`.
    pub window: String,
    /// Wei of `value` drawn in the window now (decimal).
    #[schema(pattern = "^[0-9]+$")]
    pub spent_wei: String,
    /// `spend_limit.fees`, wei (decimal); absent when fees are not limited.
    #[schema(pattern = "^[0-9]+$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fees_limit_wei: Option<String>,
    /// Wei of fees counted in the window now (decimal): paid, or reserved
    /// at the worst case for intents without a receipt yet.
    #[schema(pattern = "^[0-9]+$")]
    pub fees_spent_wei: String,
    /// The part of `fees_spent_wei` still reserved (not trued up by a
    /// receipt yet), wei (decimal).
    #[schema(pattern = "^[0-9]+$")]
    pub fees_reserved_wei: String,
    /// Intents QUEUED waiting for room.
    pub waiting: u64,
}

/// The tracking pools in `GET /v1/ops/actors`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PoolsView {
    /// Newest block the head watcher processed.
    pub head: u64,
    /// Newest head every finality worker processed.
    pub finality_head: u64,
    /// Attempt hashes the receipt matcher watches.
    pub receipt_index_size: usize,
    /// Receipt matcher workers.
    pub receipt_workers: usize,
    /// Finality workers.
    pub finality_workers: usize,
    /// Blocks waiting for the receipt matchers.
    pub receipt_queue_depth: usize,
    /// Milliseconds the oldest of them has waited.
    pub receipt_oldest_ms: u64,
    /// Heads / reorgs waiting for the finality workers.
    pub finality_queue_depth: usize,
    /// Milliseconds the oldest of them has waited.
    pub finality_oldest_ms: u64,
    /// Resubmit timer workers.
    pub resubmit_workers: usize,
    /// Resubmit timers armed (accepted, unmined intents of the leaders here).
    pub resubmit_queue_depth: u64,
    /// Milliseconds the most overdue resubmit timer has waited past its due
    /// time (0 when none is overdue; grows when the actors fall behind).
    pub resubmit_oldest_overdue_ms: u64,
    /// The head watcher and every pool worker, children of the supervisor:
    /// a restart count above zero means one failed and was spawned again.
    pub actors: Vec<TrackerActorView>,
}

/// One tracking actor in `GET /v1/ops/actors`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TrackerActorView {
    /// `head_watcher` | `receipt_worker` | `finality_worker` | `resubmit_worker`.
    #[schema(pattern = "^(head_watcher|receipt_worker|finality_worker|resubmit_worker)$")]
    pub actor: &'static str,
    /// Its slot in its pool (0 for the head watcher).
    pub slot: usize,
    /// An actor runs in this slot now (false while its restart waits).
    pub running: bool,
    /// Times the supervisor restarted it since the node started.
    pub restarts: u32,
}

/// `GET /v1/ops/actors`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ActorsView {
    /// This node.
    pub node_id: String,
    /// This process's instance id: drawn at start, part of the lease owner
    /// identity (node id + instance); a restart gets a new one.
    pub instance: String,
    /// Each chain this node serves: its supervisor and tracking pools.
    pub chains: Vec<ChainActorsView>,
    /// Every submitter known to this node, chain by chain.
    pub submitters: Vec<ActorView>,
}

/// One chain's subtree in `GET /v1/ops/actors`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChainActorsView {
    /// `[chains.<name>]` (`default` for `[chain]`).
    pub chain: String,
    /// Its chain id.
    pub chain_id: u64,
    /// The chain's supervisor actor is running.
    pub supervisor_alive: bool,
    /// Times the node's root actor started the chain's supervisor (and its
    /// subtree) again after it ended.
    pub supervisor_restarts: u32,
    /// Its tracking pools.
    pub pools: PoolsView,
}

/// One node in `GET /v1/ops/cluster`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NodeView {
    /// Node id.
    pub node_id: String,
    /// Instance id of the process registered under it.
    pub instance: String,
    /// Its HTTP address.
    pub http_addr: Option<String>,
    /// Its release.
    pub version: String,
    /// The commit it was built from (null: a node before 0.2.0).
    pub commit: Option<String>,
    /// The newest migration it knows (null: a node before 0.2.0).
    pub schema_version: Option<i64>,
    /// It does not know the database's newest migration: a newer release
    /// migrated the database, upgrade this node (README "Upgrading").
    pub older_than_database: bool,
    /// Milliseconds since its last heartbeat (database clock).
    pub heartbeat_age_ms: u64,
    /// Heartbeat younger than 3 × `node.heartbeat_interval`.
    pub alive: bool,
}

/// One lease in `GET /v1/ops/cluster`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeaseView {
    /// The chain's name.
    pub chain: String,
    /// The chain's id.
    pub chain_id: u64,
    /// The submitter.
    pub submitter: String,
    /// The holder's (or last holder's) node id.
    pub owner: String,
    /// The holder's instance id (empty for leases from before instances).
    pub owner_instance: String,
    /// The fencing token.
    pub fencing_token: i64,
    /// Milliseconds until expiry (0 when expired).
    pub expires_in_ms: i64,
    /// Expired (or released).
    pub expired: bool,
    /// The node this submitter's lease should be on (lease balancing, as
    /// the answering node sees the cluster); null when balancing is off or
    /// no node has settled yet.
    pub preferred_node: Option<String>,
}

/// `GET /v1/ops/cluster`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClusterView {
    /// The newest migration applied to the database.
    pub database_schema: i64,
    /// The builds the live nodes run (`0.2.0 (commit …)`), one entry per
    /// distinct build: more than one means an upgrade in progress.
    pub builds: Vec<String>,
    /// Every registered node.
    pub nodes: Vec<NodeView>,
    /// Every lease of this chain.
    pub leases: Vec<LeaseView>,
}

/// Body of `POST /v1/ops/submitters/{address}/unprotect`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnprotectBody {
    /// Why the operator clears PROTECT (audited): 1 to 1000 characters
    /// (surrounding blanks ignored), no control characters other than line
    /// breaks and tabs.
    #[schema(min_length = 1, max_length = 1000)]
    pub reason: String,
}

/// Answer of an operator action.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ActionView {
    /// The submitter acted on.
    pub submitter: String,
    /// `restart` or `unprotect`.
    #[schema(pattern = "^(restart|unprotect)$")]
    pub action: &'static str,
    /// The node that did it.
    pub node_id: String,
    /// For unprotect: the cleared reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_reason: Option<String>,
    /// For unprotect: the cursor's next nonce after resync.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_nonce: Option<u64>,
}
