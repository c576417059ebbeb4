//! Whole-chain reads of the lease table: the supervisor's scan for work
//! nobody drives (one query per round for every submitter, instead of every
//! standby polling its own lease) and the cluster view's lease list.

use alloy::primitives::Address;
use sqlx::{PgExecutor, PgPool};

use super::{LeaseOwner, StoreError, StoreResult};
use crate::domain::ChainId;

/// A submitter with open intents whose lease this process does not hold
/// live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnledWork {
    /// The submitter.
    pub submitter: Address,
    /// The lease holder (`None`: no lease row).
    pub owner_node: Option<String>,
    /// This process holds (or last held) the lease.
    pub mine: bool,
    /// Milliseconds until `expires_at` by the database clock; negative once
    /// expired (that long ago); 0 without a lease row.
    pub expires_in_ms: i64,
}

struct UnledRow {
    submitter: String,
    owner_node: Option<String>,
    mine: bool,
    expires_in_ms: i64,
}

/// Every submitter of the chain with open intents (QUEUED, ALLOCATED,
/// TRACKING, STUCK) — and every one of `always` (lower-case hex: submitters
/// led even when idle, to watch their funds) — whose lease `owner` does not
/// hold live: no lease row, another owner's, or one of `owner`'s that expired.
pub async fn unled_open_work(
    conn: impl PgExecutor<'_>,
    chain_id: ChainId,
    owner: &LeaseOwner,
    always: &[String],
) -> StoreResult<Vec<UnledWork>> {
    let rows = sqlx::query_as!(
        UnledRow,
        r#"SELECT o.submitter AS "submitter!", l.owner_node AS "owner_node?",
                COALESCE(l.owner_node = $2 AND l.owner_instance = $3, false) AS "mine!",
                COALESCE((EXTRACT(EPOCH FROM (l.expires_at - now())) * 1000)::bigint, 0)
                    AS "expires_in_ms!"
           FROM (
                 -- The chain's submitters with open intents, one index probe
                 -- each per phase (0 QUEUED, 1 in flight: the open-work index
                 -- is ordered by phase, chain, submitter; `phase <= 1` lets
                 -- the planner use that partial index), not a read of every
                 -- open intent — thousands a busy submitter has mined and
                 -- awaiting finality.
                 WITH RECURSIVE open_submitters(phase, submitter) AS (
                      SELECT p.phase,
                             (SELECT m.submitter FROM managed_tx m
                               WHERE m.phase = p.phase AND m.phase <= 1 AND m.chain_id = $1
                               ORDER BY m.submitter LIMIT 1)
                        FROM (VALUES (0::smallint), (1::smallint)) p(phase)
                      UNION ALL
                      SELECT o.phase,
                             (SELECT m.submitter FROM managed_tx m
                               WHERE m.phase = o.phase AND m.phase <= 1 AND m.chain_id = $1
                                 AND m.submitter > o.submitter
                               ORDER BY m.submitter LIMIT 1)
                        FROM open_submitters o WHERE o.submitter IS NOT NULL)
                 SELECT submitter FROM open_submitters WHERE submitter IS NOT NULL
                 UNION
                 SELECT unnest($4::text[])) o
           LEFT JOIN submitter_lease l ON l.chain_id = $1 AND l.submitter = o.submitter
          WHERE l.submitter IS NULL
             OR NOT (l.owner_node = $2 AND l.owner_instance = $3 AND l.expires_at > now())"#,
        chain_id as _,
        &*owner.node_id,
        &*owner.instance,
        always,
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(UnledWork {
                submitter: address(&row.submitter)?,
                owner_node: row.owner_node,
                mine: row.mine,
                expires_in_ms: row.expires_in_ms,
            })
        })
        .collect()
}

/// A lease row as the cluster view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseListing {
    /// The leased submitter.
    pub submitter: Address,
    /// The node id that holds (or last held) it.
    pub owner_node: String,
    /// The instance of that node.
    pub owner_instance: String,
    /// The current fencing token.
    pub fencing_token: i64,
    /// Milliseconds until expiry by the database clock; 0 once expired.
    pub expires_in_ms: i64,
}

struct LeaseListingRow {
    submitter: String,
    owner_node: String,
    owner_instance: String,
    fencing_token: i64,
    expires_in_ms: i64,
}

/// Every lease of the chain, by submitter.
pub async fn list(pool: &PgPool, chain_id: ChainId) -> StoreResult<Vec<LeaseListing>> {
    let rows = sqlx::query_as!(
        LeaseListingRow,
        r#"SELECT submitter, owner_node, owner_instance, fencing_token,
                GREATEST(0, (EXTRACT(EPOCH FROM (expires_at - now())) * 1000)::bigint)
                    AS "expires_in_ms!"
           FROM submitter_lease WHERE chain_id = $1 ORDER BY submitter"#,
        chain_id as _,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(LeaseListing {
                submitter: address(&row.submitter)?,
                owner_node: row.owner_node,
                owner_instance: row.owner_instance,
                fencing_token: row.fencing_token,
                expires_in_ms: row.expires_in_ms,
            })
        })
        .collect()
}

fn address(stored: &str) -> StoreResult<Address> {
    stored
        .parse()
        .map_err(|_| StoreError::Corrupt(format!("submitter {stored:?} is not an address")))
}
