//! Finding work nobody drives: configured submitters with unfinished intents
//! whose lease is free, expired, or ours (e.g. after this node restarted).

use alloy::primitives::Address;

use super::EngineShared;
use crate::store::StoreResult;

/// Configured submitters with open intents and no live foreign lease.
pub(crate) async fn submitters_with_free_work(shared: &EngineShared) -> StoreResult<Vec<Address>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT DISTINCT m.submitter
           FROM managed_tx m
           LEFT JOIN submitter_lease l ON l.chain_id = m.chain_id AND l.submitter = m.submitter
          WHERE m.chain_id = $1 AND m.state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK')
            AND (l.submitter IS NULL OR l.expires_at <= now()
                 OR (l.owner_node = $2 AND l.owner_instance = $3))",
    )
    .bind(i64::try_from(shared.config.chain_id).unwrap_or(i64::MAX))
    .bind(&*shared.config.owner.node_id)
    .bind(&*shared.config.owner.instance)
    .fetch_all(&shared.pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(address,)| address.parse::<Address>().ok())
        .filter(|address| shared.context(address).is_some())
        .collect())
}
