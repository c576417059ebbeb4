//! `/v1/ops/*`: this node's actors, the cluster, and operator actions
//! (DESIGN.md section 11). Every action is logged with the token's name and
//! written to `ops_audit`.
//!
//! Status never waits for an actor: the engine snapshot reads the handles'
//! shared atomics, and queued / in-flight / oldest-pending come from one
//! grouped query.

use std::collections::HashMap;

use alloy::primitives::Address;
use axum::{
    extract::{Path, State},
    Extension, Json,
};
use txmgr_actors::{
    store::node,
    supervisor::{Engine, OpsError},
};

use super::{
    auth::Caller,
    error::{ApiError, ApiResult},
    intent_body::parse_address,
    json::ApiJson,
    ops_state::ReloadReport,
    ops_views::{
        ActionView, ActorView, ActorsView, ClusterView, LeaseView, NodeView, PoolsView,
        UnprotectBody,
    },
    AppState,
};

fn engine(state: &AppState) -> ApiResult<&Engine> {
    state
        .ops
        .engine
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no engine runs in this process".into()))
}

fn caller_name(caller: &Option<Extension<Caller>>) -> String {
    caller
        .as_ref()
        .map_or_else(|| "anonymous".to_owned(), |c| c.name.to_string())
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Counts per submitter from one grouped query.
#[derive(Default)]
struct WorkCounts {
    queued: i64,
    in_flight: i64,
    stuck: i64,
    oldest_ms: Option<i64>,
}

async fn work_counts(state: &AppState) -> ApiResult<HashMap<String, WorkCounts>> {
    let rows: Vec<(String, i64, i64, i64, Option<i64>)> = sqlx::query_as(
        "SELECT submitter,
                count(*) FILTER (WHERE state = 'QUEUED'),
                count(*) FILTER (WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK')),
                count(*) FILTER (WHERE state = 'STUCK'),
                (EXTRACT(EPOCH FROM (now() - min(created_at))) * 1000)::bigint
           FROM managed_tx
          WHERE chain_id = $1 AND state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK')
          GROUP BY submitter",
    )
    .bind(i64::try_from(state.chain_id).unwrap_or(i64::MAX))
    .fetch_all(&state.pool)
    .await
    .map_err(txmgr_actors::StoreError::from)?;
    Ok(rows
        .into_iter()
        .map(|(submitter, queued, in_flight, stuck, oldest_ms)| {
            let counts = WorkCounts {
                queued,
                in_flight,
                stuck,
                oldest_ms,
            };
            (submitter, counts)
        })
        .collect())
}

/// `GET /v1/ops/actors`.
pub(crate) async fn actors(State(state): State<AppState>) -> ApiResult<Json<ActorsView>> {
    let snapshot = engine(&state)?.snapshot();
    let mut counts = work_counts(&state).await?;
    let submitters = snapshot
        .submitters
        .into_iter()
        .map(|s| {
            let address = format!("{:#x}", s.address);
            let work = counts.remove(&address).unwrap_or_default();
            ActorView {
                submitter: address,
                role: s.role.as_str(),
                fencing_token: s.fencing_token,
                lease_time_left_ms: s
                    .lease_time_left
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                mailbox_depth: s.mailbox_depth,
                ingress_depth: s.ingress_depth,
                queued: work.queued,
                in_flight: work.in_flight,
                stuck: work.stuck,
                oldest_pending_age_ms: work.oldest_ms,
                restarts: s.restarts,
                last_error: s.last_error,
                protect_reason: s.protect_reason,
                head_of_line_blocked: s.head_of_line_blocked,
                running: s.running,
                draining: s.draining,
                max_in_flight: s.settings.max_in_flight,
            }
        })
        .collect();
    let pools = snapshot.pools;
    Ok(Json(ActorsView {
        node_id: snapshot.node_id.to_string(),
        instance: snapshot.instance.to_string(),
        chain_id: snapshot.chain_id,
        supervisor_alive: snapshot.supervisor_alive,
        submitters,
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
        },
    }))
}

/// `GET /v1/ops/cluster`.
pub(crate) async fn cluster(State(state): State<AppState>) -> ApiResult<Json<ClusterView>> {
    let liveness = state.ops.heartbeat_interval.saturating_mul(3);
    let nodes = node::list(&state.pool, liveness)
        .await?
        .into_iter()
        .map(|n| NodeView {
            node_id: n.node_id,
            instance: n.instance,
            http_addr: n.http_addr,
            version: n.version,
            heartbeat_age_ms: u64::try_from(n.heartbeat_age.as_millis()).unwrap_or(u64::MAX),
            alive: n.alive,
        })
        .collect();
    let rows: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT submitter, owner_node, owner_instance, fencing_token,
                GREATEST(0, (EXTRACT(EPOCH FROM (expires_at - now())) * 1000)::bigint)
           FROM submitter_lease WHERE chain_id = $1 ORDER BY submitter",
    )
    .bind(i64::try_from(state.chain_id).unwrap_or(i64::MAX))
    .fetch_all(&state.pool)
    .await
    .map_err(txmgr_actors::StoreError::from)?;
    let leases = rows
        .into_iter()
        .map(
            |(submitter, owner, owner_instance, fencing_token, expires_in_ms)| LeaseView {
                preferred_node: submitter.parse().ok().and_then(|address| {
                    state
                        .ops
                        .engine
                        .as_ref()
                        .and_then(|e| e.membership().preferred(&address))
                }),
                submitter,
                owner,
                owner_instance,
                fencing_token,
                expires_in_ms,
                expired: expires_in_ms == 0,
            },
        )
        .collect();
    Ok(Json(ClusterView { nodes, leases }))
}

fn ops_error(err: OpsError) -> ApiError {
    match err {
        OpsError::UnknownSubmitter(address) => {
            ApiError::UnknownSubmitter(format!("submitter {address:#x} is not configured"))
        }
        OpsError::NotLeader { owner, .. } => ApiError::NotLeader { owner },
        OpsError::Store(err) => err.into(),
        other => {
            tracing::warn!(target: "txmgr::ops", error = %other, "operator action failed");
            ApiError::Unavailable(format!("the action did not complete: {other}"))
        }
    }
}

/// Records an operator action in the log and in `ops_audit`.
async fn audit(
    state: &AppState,
    who: &str,
    action: &str,
    submitter: Option<&Address>,
    reason: Option<&str>,
) -> ApiResult<()> {
    let node_id = state.ops.engine.as_ref().map(|e| e.node_id().to_owned());
    let submitter = submitter.map(|a| format!("{a:#x}"));
    tracing::info!(target: "txmgr::audit", who, action, submitter = submitter.as_deref(), reason, node_id = node_id.as_deref(), "operator action");
    sqlx::query(
        "INSERT INTO ops_audit (actor, action, submitter, reason, node_id) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(who)
    .bind(action)
    .bind(submitter)
    .bind(reason)
    .bind(node_id)
    .execute(&state.pool)
    .await
    .map_err(txmgr_actors::StoreError::from)?;
    Ok(())
}

/// `POST /v1/ops/submitters/{address}/restart`.
pub(crate) async fn restart(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(address): Path<String>,
) -> ApiResult<Json<ActionView>> {
    let engine = engine(&state)?;
    let address = parse_address("address", &address)?;
    let who = caller_name(&caller);
    audit(&state, &who, "restart", Some(&address), None).await?;
    engine.restart(address).await.map_err(ops_error)?;
    Ok(Json(ActionView {
        submitter: format!("{address:#x}"),
        action: "restart",
        node_id: engine.node_id().to_owned(),
        previous_reason: None,
        next_nonce: None,
    }))
}

/// `POST /v1/ops/submitters/{address}/unprotect` with `{reason}`.
pub(crate) async fn unprotect(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(address): Path<String>,
    ApiJson(body): ApiJson<UnprotectBody>,
) -> ApiResult<Json<ActionView>> {
    let engine = engine(&state)?;
    let address = parse_address("address", &address)?;
    let reason = body.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::invalid(
            "reason",
            "reason must be 1 to 1000 characters",
        ));
    }
    super::intent_body::validate_text("reason", reason, 1000)?;
    let done = engine.unprotect(address).await.map_err(ops_error)?;
    audit(
        &state,
        &caller_name(&caller),
        "unprotect",
        Some(&address),
        Some(reason),
    )
    .await?;
    Ok(Json(ActionView {
        submitter: format!("{address:#x}"),
        action: "unprotect",
        node_id: engine.node_id().to_owned(),
        previous_reason: done.previous_reason,
        next_nonce: Some(done.next_nonce),
    }))
}

/// `POST /v1/ops/reload`.
pub(crate) async fn reload(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Json<ReloadReport>> {
    let reloader =
        state.ops.reloader.clone().ok_or_else(|| {
            ApiError::Unavailable("reload is not available in this process".into())
        })?;
    let who = caller_name(&caller);
    match reloader.reload().await {
        Ok(report) => {
            audit(&state, &who, "reload", None, None).await?;
            Ok(Json(report))
        }
        Err(err) => {
            tracing::warn!(target: "txmgr::ops", who, error = %err, "reload rejected; running configuration kept");
            Err(ApiError::InvalidConfig {
                issues: err.issues.into_iter().map(|i| (i.key, i.reason)).collect(),
            })
        }
    }
}
