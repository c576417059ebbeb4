//! Counts of a chain's open intents (QUEUED, ALLOCATED, TRACKING, STUCK) for
//! the gauges and the ops view: grouped queries over the index of
//! non-terminal states. Terminal states are not counted; their number only
//! grows.

use std::time::Duration;

use alloy::primitives::Address;
use sqlx::PgPool;

use super::{StoreError, StoreResult};
use crate::domain::{ChainId, TxState};

/// The open intents of one state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateCount {
    /// Which state these intents are in.
    pub state: TxState,
    /// How many intents are in it.
    pub count: i64,
    /// Age of the oldest of them (database clock).
    pub oldest_age: Duration,
}

struct StateCountRow {
    state: String,
    count: i64,
    oldest_age_s: Option<f64>,
}

/// The chain's open intents by state; a state without any is left out.
pub async fn by_state(pool: &PgPool, chain_id: ChainId) -> StoreResult<Vec<StateCount>> {
    let rows = sqlx::query_as!(
        StateCountRow,
        r#"SELECT state, count(*) AS "count!",
                EXTRACT(EPOCH FROM (now() - min(created_at)))::float8 AS oldest_age_s
           FROM managed_tx
          WHERE chain_id = $1 AND state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK') AND phase <= 1
          GROUP BY state"#,
        chain_id as _,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(StateCount {
                state: row
                    .state
                    .parse()
                    .map_err(|e| StoreError::Corrupt(format!("{e}")))?,
                count: row.count,
                oldest_age: Duration::try_from_secs_f64(row.oldest_age_s.unwrap_or(0.0))
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// One submitter's open intents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitterWork {
    /// The submitter.
    pub submitter: Address,
    /// QUEUED: waiting for a nonce.
    pub queued: i64,
    /// ALLOCATED, TRACKING or STUCK: holding a nonce.
    pub in_flight: i64,
    /// STUCK (also counted in `in_flight`).
    pub stuck: i64,
    /// Age of the oldest open intent in milliseconds (database clock).
    pub oldest_ms: Option<i64>,
}

struct SubmitterWorkRow {
    submitter: String,
    queued: i64,
    in_flight: i64,
    stuck: i64,
    oldest_ms: Option<i64>,
}

/// The chain's open intents by submitter; a submitter without any is left
/// out.
pub async fn by_submitter(pool: &PgPool, chain_id: ChainId) -> StoreResult<Vec<SubmitterWork>> {
    let rows = sqlx::query_as!(
        SubmitterWorkRow,
        r#"SELECT submitter,
                count(*) FILTER (WHERE state = 'QUEUED') AS "queued!",
                count(*) FILTER (WHERE state IN ('ALLOCATED', 'TRACKING', 'STUCK')) AS "in_flight!",
                count(*) FILTER (WHERE state = 'STUCK') AS "stuck!",
                (EXTRACT(EPOCH FROM (now() - min(created_at))) * 1000)::bigint AS oldest_ms
           FROM managed_tx
          WHERE chain_id = $1 AND state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK') AND phase <= 1
          GROUP BY submitter"#,
        chain_id as _,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(SubmitterWork {
                submitter: row.submitter.parse().map_err(|_| {
                    StoreError::Corrupt(format!("submitter {:?} is not an address", row.submitter))
                })?,
                queued: row.queued,
                in_flight: row.in_flight,
                stuck: row.stuck,
                oldest_ms: row.oldest_ms,
            })
        })
        .collect()
}
