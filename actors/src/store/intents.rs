//! Accepting intents: the QUEUED insert with idempotency (not a critical
//! write: a QUEUED row has no nonce, so any node may insert it).

use std::collections::HashMap;

use sqlx::PgPool;
use uuid::Uuid;

use super::StoreResult;
use crate::domain::{ChainId, CreateOutcome, NewIntent, SubmitterKey, TxState, TxSummary};

/// The channel `NOTIFY`d when a submitter has new work; the payload is
/// `<chain_id>:<address>`.
pub const WORK_CHANNEL: &str = "txmgr_work";

/// `(chain_id, submitter, request_id)` of an intent.
type RequestKey = (ChainId, String, String);

/// The intent that owns a request id a create lost to.
struct RequestOwner {
    chain_id: ChainId,
    submitter: String,
    request_id: String,
    tx_id: Uuid,
    request_hash: Vec<u8>,
    state: String,
}

/// Persists a batch of creates in one transaction (group commit) and answers
/// each: created, an idempotent replay, or a conflict. Concurrent duplicates
/// settle on the `(chain_id, submitter, request_id)` unique index, never on an
/// error. Sends one `NOTIFY txmgr_work` per submitter that got new rows.
pub async fn insert_queued(pool: &PgPool, batch: &[NewIntent]) -> StoreResult<Vec<CreateOutcome>> {
    insert_queued_quiet(pool, batch, &[]).await
}

/// [`insert_queued`] without `NOTIFY txmgr_work` for the `quiet` submitters:
/// the caller wakes those itself because this node's own actor leads them
/// (NOTIFY takes a cluster-wide lock at commit).
pub async fn insert_queued_quiet(
    pool: &PgPool,
    batch: &[NewIntent],
    quiet: &[SubmitterKey],
) -> StoreResult<Vec<CreateOutcome>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids = Vec::with_capacity(batch.len());
    let mut chains = Vec::with_capacity(batch.len());
    let mut submitters = Vec::with_capacity(batch.len());
    let mut request_ids = Vec::with_capacity(batch.len());
    let mut hashes = Vec::with_capacity(batch.len());
    let mut intents = Vec::with_capacity(batch.len());
    let mut traces: Vec<Option<String>> = Vec::with_capacity(batch.len());
    for create in batch {
        traces.push(create.trace_context.map(|t| t.header()));
        ids.push(create.tx_id);
        chains.push(create.submitter.chain_id);
        submitters.push(create.submitter.address_hex());
        request_ids.push(create.request_id.clone());
        hashes.push(create.intent.request_hash(&create.submitter).to_vec());
        intents.push(
            serde_json::to_value(&create.intent).map_err(|e| {
                super::StoreError::Corrupt(format!("intent does not serialise: {e}"))
            })?,
        );
    }

    let mut tx = pool.begin().await?;
    // WITH ORDINALITY keeps ingress order = order of acceptance in the batch.
    let inserted: Vec<Uuid> = sqlx::query_scalar!(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent, state, trace_context)
         SELECT t.tx_id, t.chain_id, t.submitter, t.request_id, t.request_hash, t.intent, 'QUEUED', t.trace_context
           FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::jsonb[], $7::text[])
                WITH ORDINALITY AS t(tx_id, chain_id, submitter, request_id, request_hash, intent, trace_context, ord)
          ORDER BY t.ord
         ON CONFLICT (chain_id, submitter, request_id) WHERE request_id IS NOT NULL DO NOTHING
         RETURNING tx_id",
        &ids,
        // ChainId and the optional request ids are bound as they are; the
        // SQL casts give the element types.
        &chains as _,
        &submitters,
        &request_ids as _,
        &hashes,
        &intents,
        &traces as _,
    )
    .fetch_all(&mut *tx)
    .await?;
    let inserted: std::collections::HashSet<Uuid> = inserted.into_iter().collect();

    // Creates that lost on the request-id index: look up the owner of the id.
    let mut existing: HashMap<RequestKey, RequestOwner> = HashMap::new();
    let lost: Vec<usize> = (0..batch.len())
        .filter(|i| !inserted.contains(&ids[*i]))
        .collect();
    if !lost.is_empty() {
        let lost_chains: Vec<ChainId> = lost.iter().map(|i| chains[*i]).collect();
        let lost_submitters: Vec<String> = lost.iter().map(|i| submitters[*i].clone()).collect();
        let lost_request_ids: Vec<Option<String>> =
            lost.iter().map(|i| request_ids[*i].clone()).collect();
        let rows = sqlx::query_as!(
            RequestOwner,
            r#"SELECT m.chain_id AS "chain_id: ChainId", m.submitter,
                      m.request_id AS "request_id!", m.tx_id, m.request_hash AS "request_hash!", m.state
                 FROM managed_tx m
                 JOIN UNNEST($1::bigint[], $2::text[], $3::text[]) AS k(chain_id, submitter, request_id)
                   ON m.chain_id = k.chain_id AND m.submitter = k.submitter AND m.request_id = k.request_id"#,
            &lost_chains as _,
            &lost_submitters,
            &lost_request_ids as _,
        )
        .fetch_all(&mut *tx)
        .await?;
        for owner in rows {
            let key = (
                owner.chain_id,
                owner.submitter.clone(),
                owner.request_id.clone(),
            );
            existing.insert(key, owner);
        }
    }

    let mut notified: Vec<SubmitterKey> = Vec::new();
    let mut outcomes = Vec::with_capacity(batch.len());
    for (i, create) in batch.iter().enumerate() {
        let summary = |tx_id: Uuid, state: TxState| TxSummary {
            tx_id,
            state,
            submitter: create.submitter.address,
            request_id: create.request_id.clone(),
        };
        if inserted.contains(&create.tx_id) {
            if !notified.contains(&create.submitter) {
                notified.push(create.submitter);
            }
            outcomes.push(CreateOutcome::Created(summary(
                create.tx_id,
                TxState::Queued,
            )));
            continue;
        }
        let key = (
            chains[i],
            submitters[i].clone(),
            request_ids[i].clone().unwrap_or_default(),
        );
        let Some(owner) = existing.get(&key) else {
            return Err(super::StoreError::Corrupt(format!(
                "request id {:?} conflicted but its row is not visible",
                create.request_id
            )));
        };
        if owner.request_hash == hashes[i] {
            let state = owner
                .state
                .parse::<TxState>()
                .map_err(|e| super::StoreError::Corrupt(e.to_string()))?;
            outcomes.push(CreateOutcome::Existing(summary(owner.tx_id, state)));
        } else {
            outcomes.push(CreateOutcome::Conflict { tx_id: owner.tx_id });
        }
    }
    notified.retain(|key| !quiet.contains(key));
    for submitter in notified {
        let payload = format!("{}:{}", submitter.chain_id, submitter.address_hex());
        sqlx::query!("SELECT FROM pg_notify($1, $2)", WORK_CHANNEL, payload)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(outcomes)
}

/// Open (not terminal) intents of a submitter: QUEUED, ALLOCATED, TRACKING
/// or STUCK. Zero means nothing awaits a nonce, a receipt or finality.
pub async fn open_count(pool: &PgPool, submitter: SubmitterKey) -> StoreResult<i64> {
    let count = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM managed_tx
            WHERE chain_id = $1 AND submitter = $2
              AND state IN ('QUEUED', 'ALLOCATED', 'TRACKING', 'STUCK') AND phase <= 1"#,
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_one(pool)
    .await?;
    Ok(count)
}
