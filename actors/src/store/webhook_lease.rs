//! Webhook leases (README "Webhooks"): exactly one process delivers for a
//! webhook at a time. The rules are the submitter leases' (`lease.rs`): the
//! database clock decides expiry, the owner is the process (`node_id` and
//! instance), a change of owner increments the fencing token, and every
//! write of the cursor is checked against that token.

use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::{millis, LeaseOwner, StoreResult};
use crate::{
    domain::{ChainId, LeaseTiming},
    metrics::WEBHOOK_LEASES,
};

/// Names one webhook's row: the chain the deployment serves and the
/// webhook's configured name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WebhookKey {
    /// The chain.
    pub chain_id: ChainId,
    /// `[[webhooks]].name`.
    pub name: String,
}

/// A held webhook lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookLease {
    /// The fencing token every cursor write is checked against.
    pub token: i64,
    /// Local, conservative end: sent-at + duration − skew.
    pub valid_until: Instant,
    /// True when this grant took the lease from another owner (or a lapsed
    /// lease of ours): the holder must reload the cursor.
    pub fresh: bool,
}

/// Acquires, renews or takes over the webhook's lease in one statement (the
/// rules of [`acquire_or_renew`](super::acquire_or_renew)); a foreign
/// expired lease is taken only `clock_skew + defer` after it expired. `None`
/// when another owner holds it.
///
/// The first grant creates the webhook's row; its cursor starts at the
/// current end of the feed when `start_at_end` (the last row every reader
/// can already see: a transaction still running sorts after it, see
/// `completions`), else at the beginning.
pub async fn acquire_or_renew(
    pool: &PgPool,
    key: &WebhookKey,
    owner: &LeaseOwner,
    timing: LeaseTiming,
    defer: Duration,
    start_at_end: bool,
) -> StoreResult<Option<WebhookLease>> {
    let LeaseTiming {
        duration,
        clock_skew,
        ..
    } = timing;
    let sent_at = Instant::now();
    let valid_until = sent_at + duration.saturating_sub(clock_skew);
    // The sub-select locks the row and hands its old values to RETURNING.
    let updated = sqlx::query!(
        r#"UPDATE webhook_cursor w
            SET fencing_token = CASE WHEN o.mine AND o.expires_at > now()
                                     THEN o.fencing_token ELSE o.fencing_token + 1 END,
                owner_node = $3, owner_instance = $4,
                expires_at = now() + $5::bigint * interval '1 millisecond', updated_at = now()
           FROM (SELECT chain_id, webhook, fencing_token, expires_at,
                        (owner_node = $3 AND owner_instance = $4) AS mine
                   FROM webhook_cursor WHERE chain_id = $1 AND webhook = $2 FOR UPDATE) o
          WHERE w.chain_id = o.chain_id AND w.webhook = o.webhook
            AND (o.mine OR o.expires_at <= now() - $6::bigint * interval '1 millisecond')
      RETURNING w.fencing_token AS "token!", (o.mine AND o.expires_at > now()) AS "renewed!""#,
        key.chain_id as _,
        &key.name,
        &*owner.node_id,
        &*owner.instance,
        millis(duration),
        millis(clock_skew.saturating_add(defer)),
    )
    .fetch_optional(pool)
    .await?
    .map(|row| (row.token, row.renewed));
    let outcome = match updated {
        Some((token, renewed)) => Some(WebhookLease {
            token,
            valid_until,
            fresh: !renewed,
        }),
        None => {
            let inserted = sqlx::query_scalar!(
                "INSERT INTO webhook_cursor
                        (chain_id, webhook, owner_node, owner_instance, fencing_token, expires_at,
                         cursor_xid, cursor_seq)
                 SELECT $1, $2, $3, $4, 1, now() + $5::bigint * interval '1 millisecond',
                        COALESCE(e.xid, '0'), COALESCE(e.seq, 0)
                   FROM (SELECT NULL) AS one
                   LEFT JOIN LATERAL (
                        SELECT xid, seq FROM tx_completion
                         -- The end of the feed over every chain: one
                         -- webhook's cursor covers them all.
                         WHERE $6::boolean
                           AND xid < (SELECT txmgr_feed_horizon())
                         ORDER BY xid DESC, seq DESC LIMIT 1) e ON true
                 ON CONFLICT (chain_id, webhook) DO NOTHING
                 RETURNING fencing_token",
                key.chain_id as _,
                &key.name,
                &*owner.node_id,
                &*owner.instance,
                millis(duration),
                start_at_end,
            )
            .fetch_optional(pool)
            .await?;
            // A lost insert race means another process holds it now.
            inserted.map(|token| WebhookLease {
                token,
                valid_until,
                fresh: true,
            })
        }
    };
    let label = match &outcome {
        Some(lease) if lease.fresh => "acquired",
        Some(_) => "renewed",
        None => "not_owner",
    };
    metrics::counter!(WEBHOOK_LEASES, "webhook" => key.name.clone(), "result" => label)
        .increment(1);
    Ok(outcome)
}

/// Gives the lease up at once (shutdown, removal from the configuration,
/// hand-over to the preferred node). False when it was no longer ours.
pub async fn release(
    pool: &PgPool,
    key: &WebhookKey,
    owner: &LeaseOwner,
    token: i64,
) -> StoreResult<bool> {
    let result = sqlx::query!(
        "UPDATE webhook_cursor SET expires_at = 'epoch', updated_at = now()
          WHERE chain_id = $1 AND webhook = $2 AND owner_node = $3 AND owner_instance = $4
            AND fencing_token = $5",
        key.chain_id as _,
        &key.name,
        &*owner.node_id,
        &*owner.instance,
        token,
    )
    .execute(pool)
    .await?;
    let released = result.rows_affected() == 1;
    if released {
        metrics::counter!(WEBHOOK_LEASES, "webhook" => key.name.clone(), "result" => "released")
            .increment(1);
    }
    Ok(released)
}
