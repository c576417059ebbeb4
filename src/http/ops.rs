//! `/v1/ops/*` views: this node's actors and the cluster (README "HTTP
//! API"); the operator actions on submitters and the node are in
//! `ops_actions`.
//!
//! Status never waits for an actor: the engine snapshot reads the handles'
//! shared atomics, and queued / in-flight / oldest-pending come from one
//! grouped query.

use std::collections::HashMap;

use axum::{
    extract::{rejection::QueryRejection, Query, State},
    Json,
};
use txmgr_actors::{
    node::Engine,
    store::{
        lease_scan, node,
        open_work::{self, SubmitterWork},
    },
};

use super::{
    auth::Caller,
    error::{ApiError, ApiResult, ErrorResponse},
    ops_views::{
        ActorView, ActorsView, ChainActorsView, ClusterView, LeaseView, NodeView, PausedView,
        PoolsView, SpendView, TrackerActorView,
    },
    AppState, ServedChain,
};

pub(super) fn engine(chain: &ServedChain) -> ApiResult<&Engine> {
    chain
        .engine
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no engine runs in this process".into()))
}

/// The chain an action on a submitter names with `?chain_id=` (required
/// when several chains are served).
pub(super) fn chain_param(
    state: &AppState,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<std::sync::Arc<ServedChain>> {
    let Query(pairs) =
        pairs.map_err(|e| ApiError::invalid_request(format!("malformed query string: {e}")))?;
    let mut chain_id = None;
    super::query::each_once(pairs, |key, value| {
        if key != "chain_id" {
            return Ok(false);
        }
        chain_id = Some(super::query::chain_id("chain_id", &value)?);
        Ok(true)
    })?;
    state.chains.resolve(chain_id, "chain_id")
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Open work per submitter (lower-case `0x` hex) of one chain, from one
/// grouped query.
async fn work_counts(
    state: &AppState,
    chain: &ServedChain,
) -> ApiResult<HashMap<String, SubmitterWork>> {
    Ok(open_work::by_submitter(&state.pool, chain.chain_id)
        .await?
        .into_iter()
        .map(|work| (format!("{:#x}", work.submitter), work))
        .collect())
}

/// The spend window of each submitter with a spend limit on `chain` (lower-case
/// `0x` hex), from one query.
async fn spend_windows(
    state: &AppState,
    chain: &ServedChain,
    engine: &Engine,
) -> ApiResult<HashMap<String, SpendView>> {
    let limits = engine.spend_limits();
    let windows: Vec<_> = limits.iter().map(|(a, l)| (*a, l.window)).collect();
    let rows = txmgr_actors::store::spend::windows(&state.pool, chain.chain_id, &windows).await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let (_, limit) = limits.iter().find(|(a, _)| *a == row.address)?;
            Some((
                format!("{:#x}", row.address),
                SpendView {
                    limit_wei: limit.value.map(|v| v.to_string()),
                    window: humantime::format_duration(limit.window).to_string(),
                    spent_wei: row.spent_wei,
                    fees_limit_wei: limit.fees.map(|v| v.to_string()),
                    fees_spent_wei: row.fees_spent_wei,
                    fees_reserved_wei: row.fees_reserved_wei,
                    waiting: u64::try_from(row.waiting).unwrap_or(0),
                },
            ))
        })
        .collect())
}

/// A submitter's pause as the actors view shows it: the operator's first,
/// else the configuration's.
fn paused_view(
    pause: Option<&txmgr_actors::store::pause::Pause>,
    settings: &txmgr_actors::submitter::SubmitterSettings,
) -> Option<PausedView> {
    let accepts_creates = settings.pause_accepts_creates;
    match pause {
        Some(pause) => Some(PausedView {
            source: "api",
            reason: pause.reason.clone(),
            halt_resubmits: pause.halt_resubmits,
            paused_by: pause.paused_by.clone(),
            accepts_creates,
        }),
        None => settings.paused.then(|| PausedView {
            source: "config",
            reason: "paused = true in the configuration".to_owned(),
            halt_resubmits: false,
            paused_by: "config".to_owned(),
            accepts_creates,
        }),
    }
}

/// `GET /v1/ops/actors`.
#[utoipa::path(get, path = "/v1/ops/actors", tag = "ops",
    responses(
        (status = 200, description = "this node's actors and pools", body = ActorsView),
        (status = 500, description = "internal: a database error; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: no engine in this process, or the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn actors(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<ActorsView>> {
    let mut chains = Vec::new();
    let mut submitters = Vec::new();
    let mut node = None;
    for chain in state.chains.list().iter() {
        let snapshot = engine(chain)?.snapshot();
        let counts = work_counts(&state, chain).await?;
        let spend = spend_windows(&state, chain, engine(chain)?).await?;
        node.get_or_insert((snapshot.node_id.to_string(), snapshot.instance.to_string()));
        let (view, mut actors) = chain_actors(chain, snapshot, counts, &caller);
        for actor in &mut actors {
            actor.spend = spend.get(&actor.submitter).cloned();
        }
        chains.push(view);
        submitters.extend(actors);
    }
    let (node_id, instance) = node.unwrap_or_default();
    Ok(Json(ActorsView {
        node_id,
        instance,
        chains,
        submitters,
    }))
}

/// One chain's part of the actors view: its supervisor and pools, and its
/// submitters the caller may see.
fn chain_actors(
    chain: &ServedChain,
    snapshot: txmgr_actors::node::EngineSnapshot,
    mut counts: HashMap<String, SubmitterWork>,
    caller: &Caller,
) -> (ChainActorsView, Vec<ActorView>) {
    let submitters = snapshot
        .submitters
        .into_iter()
        // A token limited to some submitters sees only theirs; the pools
        // and the node stay visible.
        .filter(|s| caller.may_use_on(chain.chain_id, &s.address))
        .map(|s| {
            let address = format!("{:#x}", s.address);
            let work = counts.remove(&address);
            ActorView {
                chain: chain.name.clone(),
                chain_id: chain.chain_id.get(),
                submitter: address,
                role: s.role.as_str(),
                fencing_token: s.fencing_token,
                lease_time_left_ms: s
                    .lease_time_left
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                mailbox_depth: s.mailbox_depth,
                ingress_depth: s.ingress_depth,
                queued: work.map_or(0, |w| w.queued),
                in_flight: work.map_or(0, |w| w.in_flight),
                stuck: work.map_or(0, |w| w.stuck),
                oldest_pending_age_ms: work.and_then(|w| w.oldest_ms),
                restarts: s.restarts,
                last_error: s.last_error,
                protect_reason: s.protect_reason,
                paused: paused_view(s.pause.as_deref(), &s.settings),
                spend: None,
                head_of_line_blocked: s.head_of_line_blocked,
                running: s.running,
                draining: s.draining,
                max_in_flight: s.settings.max_in_flight,
                balance_wei: s.funds.map(|(balance, _)| balance.to_string()),
                min_balance_wei: s.settings.min_balance.map(|m| m.to_string()),
                funds_low: s.funds.map(|(_, low)| low),
                signer_kind: s.signer_kind,
            }
        })
        .collect();
    let pools = snapshot.pools;
    let view = ChainActorsView {
        chain: chain.name.clone(),
        chain_id: snapshot.chain_id,
        supervisor_alive: snapshot.supervisor_alive,
        supervisor_restarts: snapshot.supervisor_restarts,
        pools: PoolsView {
            head: pools.head,
            finality_head: pools.finality_head,
            receipt_index_size: pools.receipt_index_size,
            receipt_workers: pools.receipt_workers,
            finality_workers: pools.finality_workers,
            receipt_queue_depth: pools.receipt_queue.depth,
            receipt_oldest_ms: millis(pools.receipt_queue.oldest_age),
            finality_queue_depth: pools.finality_queue.depth,
            finality_oldest_ms: millis(pools.finality_queue.oldest_age),
            resubmit_workers: pools.resubmit.workers,
            resubmit_queue_depth: pools.resubmit.pending,
            resubmit_oldest_overdue_ms: millis(pools.resubmit.oldest_overdue),
            actors: pools
                .actors
                .iter()
                .map(|a| TrackerActorView {
                    actor: a.child.kind(),
                    slot: a.child.slot(),
                    running: a.running,
                    restarts: a.restarts,
                })
                .collect(),
        },
    };
    (view, submitters)
}

/// `GET /v1/ops/cluster`.
#[utoipa::path(get, path = "/v1/ops/cluster", tag = "ops",
    responses(
        (status = 200, description = "nodes and leases", body = ClusterView),
        (status = 500, description = "internal: a database error; details only in the node's log", body = ErrorResponse),
        (status = 503, description = "unavailable: the database is unavailable", body = ErrorResponse)))]
pub(crate) async fn cluster(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<ClusterView>> {
    let liveness = state.ops.heartbeat_interval.saturating_mul(3);
    let database_schema = txmgr_actors::store::applied_migrations(&state.pool)
        .await?
        .last()
        .copied()
        .unwrap_or_default();
    let listed = node::list(&state.pool, liveness).await?;
    let mut builds: Vec<String> = listed
        .iter()
        .filter(|n| n.alive)
        .map(|n| {
            format!(
                "{} (commit {})",
                n.version,
                n.commit.as_deref().unwrap_or("unknown")
            )
        })
        .collect();
    builds.sort_unstable();
    builds.dedup();
    let nodes = listed
        .into_iter()
        .map(|n| NodeView {
            node_id: n.node_id,
            instance: n.instance,
            http_addr: n.http_addr,
            version: n.version,
            commit: n.commit,
            // A node that records no schema predates the column, which the
            // database has: older than it.
            older_than_database: n.schema_version.is_none_or(|v| v < database_schema),
            schema_version: n.schema_version,
            heartbeat_age_ms: u64::try_from(n.heartbeat_age.as_millis()).unwrap_or(u64::MAX),
            alive: n.alive,
        })
        .collect();
    let mut leases = Vec::new();
    for chain in state.chains.list().iter() {
        let listed = lease_scan::list(&state.pool, chain.chain_id).await?;
        leases.extend(
            listed
                .into_iter()
                .filter(|lease| caller.may_use_on(chain.chain_id, &lease.submitter))
                .map(|lease| LeaseView {
                    chain: chain.name.clone(),
                    chain_id: chain.chain_id.get(),
                    preferred_node: chain
                        .engine
                        .as_ref()
                        .and_then(|e| e.membership().preferred(&lease.submitter)),
                    submitter: format!("{:#x}", lease.submitter),
                    owner: lease.owner_node,
                    owner_instance: lease.owner_instance,
                    fencing_token: lease.fencing_token,
                    expires_in_ms: lease.expires_in_ms,
                    expired: lease.expires_in_ms == 0,
                }),
        );
    }
    Ok(Json(ClusterView {
        database_schema,
        builds,
        nodes,
        leases,
    }))
}
