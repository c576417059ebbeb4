//! Renewing all of a node's leases in one statement (README "Data model and leases",
//! section 16: "lease work per node, not per submitter").
//!
//! The rules are those of a renewal by [`acquire_or_renew`](super::acquire_or_renew):
//! only the same owner (node id and instance), only with the same token, only
//! while the lease has not expired by the database clock. A lease that is not
//! returned was lost — taken over, handed over, released, or lapsed — and its
//! holder must stop.

use std::time::Duration;

use sqlx::PgPool;

use super::{millis, LeaseOwner, StoreResult};
use crate::{
    domain::{ChainId, SubmitterKey},
    metrics::LEASE_ACQUISITIONS,
};

/// One lease this process holds, as the batch renewal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease {
    /// The leased submitter.
    pub submitter: SubmitterKey,
    /// The fencing token it is held with.
    pub token: i64,
}

/// Renews every lease of `held` that `owner` still holds with its token and
/// that has not expired, in one `UPDATE ... FROM UNNEST`, for `duration` from
/// the database's `now()`. Returns, for each entry of `held` in order,
/// whether it was renewed. Row locks make it wait for in-flight fenced
/// transactions of those submitters, as a single renewal would; it takes
/// them in key order, the order the group committer locks lease rows in
/// (`store::group`), so the two never deadlock.
pub async fn renew_all(
    pool: &PgPool,
    owner: &LeaseOwner,
    duration: Duration,
    held: &[HeldLease],
) -> StoreResult<Vec<bool>> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let chain_ids: Vec<ChainId> = held.iter().map(|h| h.submitter.chain_id).collect();
    let submitters: Vec<String> = held.iter().map(|h| h.submitter.address_hex()).collect();
    let tokens: Vec<i64> = held.iter().map(|h| h.token).collect();
    let renewed = sqlx::query_scalar!(
        r#"WITH held AS (
             SELECT l.chain_id, l.submitter, h.position
               FROM submitter_lease l
               JOIN UNNEST($1::bigint[], $2::text[], $3::bigint[])
                    WITH ORDINALITY AS h(chain_id, submitter, token, position)
                 ON l.chain_id = h.chain_id AND l.submitter = h.submitter
                AND l.fencing_token = h.token
              WHERE l.owner_node = $4 AND l.owner_instance = $5 AND l.expires_at > now()
              ORDER BY l.chain_id, l.submitter
                FOR UPDATE OF l)
         UPDATE submitter_lease l
            SET expires_at = now() + $6::bigint * interval '1 millisecond', updated_at = now()
           FROM held
          WHERE l.chain_id = held.chain_id AND l.submitter = held.submitter
      RETURNING held.position AS "position!""#,
        &chain_ids as _,
        &submitters,
        &tokens,
        &*owner.node_id,
        &*owner.instance,
        millis(duration),
    )
    .fetch_all(pool)
    .await?;
    let mut result = vec![false; held.len()];
    for position in renewed {
        // ORDINALITY counts from 1.
        if let Some(slot) = usize::try_from(position - 1)
            .ok()
            .and_then(|i| result.get_mut(i))
        {
            *slot = true;
        }
    }
    let count = result.iter().filter(|r| **r).count();
    // A lease keeper renews one chain's leases.
    let chain = crate::metrics::chain_label(held[0].submitter.chain_id);
    metrics::counter!(LEASE_ACQUISITIONS, "chain" => chain.clone(), "result" => "renewed")
        .increment(count as u64);
    let lost = held.len() - count;
    if lost > 0 {
        metrics::counter!(LEASE_ACQUISITIONS, "chain" => chain.clone(), "result" => "lost")
            .increment(lost as u64);
    }
    metrics::counter!(crate::metrics::LEASE_RENEW_STATEMENTS, "chain" => chain).increment(1);
    Ok(result)
}
