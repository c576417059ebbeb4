//! Fillers: when a released nonce sits below nonces already allocated and no
//! queued intent takes it, a 0-value self-transfer of the submitter takes it,
//! recorded as an intent of its own so the nonce line moves on (README
//! "How an intent is executed").

use std::time::Duration;

use alloy::primitives::U256;
use sqlx::PgPool;
use uuid::Uuid;

use super::{millis, nonce_cursor, FencedTx, StoreError, StoreResult};
use crate::domain::{Intent, SubState, SubmitterKey};

/// Request ids starting with this are txmgr's own fillers
/// (`filler:<nonce>`); clients may not use the prefix.
pub const REQUEST_ID_PREFIX: &str = crate::domain::ENGINE_REQUEST_ID_PREFIXES[0];

/// The released nonces of the submitter that lie below one of its open
/// (allocated, tracking or stuck) nonces: gaps that hold everything above.
pub async fn gaps(pool: &PgPool, key: SubmitterKey) -> StoreResult<Vec<u64>> {
    let gaps = sqlx::query_scalar!(
        r#"SELECT r.nonce AS "nonce!" FROM submitter_nonce_cursor c, UNNEST(c.released) AS r(nonce)
          WHERE c.chain_id = $1 AND c.submitter = $2
            AND r.nonce < (SELECT max(m.nonce) FROM managed_tx m
                            WHERE m.chain_id = $1 AND m.submitter = $2
                              AND m.state IN ('ALLOCATED', 'TRACKING', 'STUCK') AND m.phase = 1)
          ORDER BY r.nonce"#,
        key.chain_id as _,
        key.address_hex(),
    )
    .fetch_all(pool)
    .await?;
    gaps.into_iter()
        .map(|n| u64::try_from(n).map_err(|e| StoreError::Corrupt(e.to_string())))
        .collect()
}

/// The intent a filler sends: nothing, to the submitter itself; gas is
/// estimated when it is signed (21000 on L1, more where a plain transfer
/// costs more).
pub fn filler_intent(key: SubmitterKey) -> Intent {
    Intent::transfer(key.address, U256::ZERO)
}

/// Takes the released `nonces` out of the cursor and gives each to a new
/// filler intent, ALLOCATED without an attempt (the pipeline's recovery
/// signs and broadcasts it like any other), in the caller's fenced
/// transaction. A nonce whose last filler is younger than `pause` is left
/// alone (a filler refused at once must not turn into a loop). Returns the
/// fillers made, with their nonces.
pub async fn create(
    ftx: &mut FencedTx,
    nonces: &[u64],
    resubmit_interval: Duration,
    pause: Duration,
) -> StoreResult<Vec<(Uuid, u64)>> {
    let key = ftx.submitter();
    let token = ftx.token();
    let intent = filler_intent(key);
    let hash = intent.request_hash(&key).to_vec();
    let json = serde_json::to_value(&intent)
        .map_err(|e| StoreError::Corrupt(format!("filler does not serialise: {e}")))?;
    let mut wanted = Vec::new();
    for &nonce in nonces {
        let recent = sqlx::query_scalar!(
            r#"SELECT EXISTS (SELECT 1 FROM managed_tx
                               WHERE chain_id = $1 AND submitter = $2
                                 AND (request_id = $3 OR request_id LIKE $3 || ':%')
                                 AND created_at > now() - $4::bigint * interval '1 millisecond')
                   AS "recent!""#,
            key.chain_id as _,
            key.address_hex(),
            format!("{REQUEST_ID_PREFIX}{nonce}"),
            millis(pause),
        )
        .fetch_one(ftx.conn())
        .await?;
        if !recent {
            wanted.push(nonce);
        }
    }
    let taken = nonce_cursor::take_released(ftx, &wanted).await?;
    let mut made = Vec::with_capacity(taken.len());
    for nonce in taken {
        let tx_id = Uuid::now_v7();
        // `filler:<nonce>`, or `filler:<nonce>:<id>` when an earlier filler
        // of that nonce ended without being mined.
        for request_id in [
            format!("{REQUEST_ID_PREFIX}{nonce}"),
            format!("{REQUEST_ID_PREFIX}{nonce}:{tx_id}"),
        ] {
            let nonce_db = i64::try_from(nonce).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let inserted = sqlx::query!(
                "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent,
                        state, sub_state, nonce, fencing_token, allocated_at, retry_at, next_resubmit_at)
                 VALUES ($1, $2, $3, $4, $5, $6, 'ALLOCATED', $10, $7, $8, now(), now(),
                         now() + $9::bigint * interval '1 millisecond')
                 ON CONFLICT (chain_id, submitter, request_id) WHERE request_id IS NOT NULL DO NOTHING",
                tx_id,
                key.chain_id as _,
                key.address_hex(),
                &request_id,
                &hash,
                &json,
                nonce_db,
                token,
                millis(resubmit_interval),
                SubState::Filler as _,
            )
            .execute(ftx.conn())
            .await?
            .rows_affected();
            if inserted == 1 {
                made.push((tx_id, nonce));
                break;
            }
        }
    }
    Ok(made)
}
