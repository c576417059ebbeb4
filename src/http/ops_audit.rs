//! The audit trail of the operator actions in [`super::ops`]: the row in
//! `ops_audit` (see `txmgr_actors::store::audit`) and the `txmgr::audit`
//! log line.

use std::future::Future;

use txmgr_actors::store::audit::{self, AuditEntry, AuditOutcome};

use super::{error::ApiResult, AppState};

/// This node's id for the audit row (`unknown` in a process without an engine).
pub(super) fn node_name(state: &AppState) -> String {
    state
        .chains
        .list()
        .iter()
        .find_map(|c| c.engine.as_ref())
        .map_or_else(|| "unknown".to_owned(), |e| e.node_id().to_owned())
}

/// The audit row of an operator action taken on this node.
pub(super) fn audit_entry<'a>(
    node_id: &'a str,
    who: &'a str,
    action: &'a str,
    on: Option<(txmgr_actors::domain::ChainId, &'a str)>,
    reason: Option<&'a str>,
) -> AuditEntry<'a> {
    AuditEntry {
        actor: who,
        action,
        chain_id: on.map(|(chain, _)| chain),
        submitter: on.map(|(_, submitter)| submitter),
        reason,
        node_id: Some(node_id),
        tx_id: None,
    }
}

/// Logs an operator action (target `txmgr::audit`) once its outcome is known.
pub(super) fn log_action(entry: &AuditEntry<'_>, outcome: AuditOutcome) {
    tracing::info!(target: "txmgr::audit", who = entry.actor, action = entry.action,
        submitter = entry.submitter, reason = entry.reason, node_id = entry.node_id,
        outcome = outcome.as_str(), "operator action");
}

/// Runs an action on this node's running state (nothing a database
/// transaction could hold) between its audit row and the row's outcome:
/// the row is written `started` first, so no action runs unaudited — if it
/// cannot be written, nothing is done — and then set to `done` or `failed`,
/// so no row claims an action that failed.
pub(super) async fn audited<T>(
    state: &AppState,
    entry: &AuditEntry<'_>,
    action: impl Future<Output = ApiResult<T>>,
) -> ApiResult<T> {
    let mut conn = state
        .pool
        .acquire()
        .await
        .map_err(txmgr_actors::StoreError::from)?;
    let id = audit::insert(&mut conn, entry, AuditOutcome::Started).await?;
    drop(conn);
    let result = action.await;
    let outcome = if result.is_ok() {
        AuditOutcome::Done
    } else {
        AuditOutcome::Failed
    };
    log_action(entry, outcome);
    if let Err(err) = audit::set_outcome(&state.pool, id, outcome).await {
        // The action's answer stands: the row exists and says `started`.
        tracing::error!(target: "txmgr::audit", audit_id = id, outcome = outcome.as_str(),
            error = %err, "could not record the outcome of an operator action");
    }
    result
}
