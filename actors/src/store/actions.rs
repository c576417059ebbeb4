//! Operator actions on one transaction (cancel, speed up, re-broadcast), as
//! any node records them (README "Resubmission, fee bumps, STUCK and cancel" and "HTTP API").
//!
//! A QUEUED intent holds no nonce, so cancelling it is a plain state change
//! (not fenced — it touches no nonce — but ordered by the row lock against a
//! racing allocation, which locks QUEUED rows before drawing nonces and skips
//! a cancelled one; see `pipeline::lock_queued`). The same holds for a STUCK
//! intent whose nonce another key consumed: it never executed.
//! Anything later needs the leader: the request is stored on the intent and
//! the leader claims it, fenced, like a due resubmit.

use alloy::primitives::Address;
use uuid::Uuid;

use super::{
    audit::{self, AuditEntry, AuditOutcome},
    intents::WORK_CHANNEL,
    resubmit_claims::OperatorAction,
    StoreError, StoreResult,
};
use crate::domain::{ChainId, SubState, TxState};

/// What became of an operator's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionOutcome {
    /// A QUEUED intent was cancelled at once (no nonce used).
    Cancelled,
    /// An intent whose nonce an outsider consumed is QUEUED again; it gets
    /// a fresh nonce from the leader.
    Requeued,
    /// The leader will act on it (it has been notified).
    Requested {
        /// The state the intent was in.
        state: TxState,
    },
    /// A cancel of an intent already being cancelled (a cancel is asked for,
    /// or a cancel attempt is signed) or already CANCELLED: nothing was
    /// recorded or changed, so repeating a cancel never replaces the intent
    /// again.
    Unchanged {
        /// The state the intent is in.
        state: TxState,
    },
    /// The state does not allow it (terminal, already mined, not broadcast yet).
    NotAllowed {
        /// The state the intent is in.
        state: TxState,
        /// Why, for the 409 message.
        reason: String,
    },
    /// The same action on this intent was asked for less than the caller's
    /// minimum interval ago; nothing was done.
    TooSoon {
        /// When the next one may be asked for.
        retry_after: std::time::Duration,
    },
    /// No such transaction on this chain.
    NotFound,
}

/// Who asked and why (written to `ops_audit`).
#[derive(Debug, Clone)]
pub struct Requester<'a> {
    /// Token name (never the token).
    pub name: &'a str,
    /// Free-text reason, if given.
    pub reason: Option<&'a str>,
    /// The node that took the request.
    pub node_id: &'a str,
}

/// `last_error` of an intent cancelled at once on request. Not the token's
/// name nor its reason: they are an operator's free text, and `last_error`
/// reaches clients and webhook receivers; `ops_audit` keeps them.
const CANCELLED_ON_REQUEST: &str = "cancelled on request (the ops audit says who and why)";

/// `last_error` of an intent requeued on request (see [`CANCELLED_ON_REQUEST`]).
const REQUEUED_ON_REQUEST: &str = "requeued on request (the ops audit says who and why)";

/// The intent an action is asked for, row-locked.
struct ActionTarget {
    submitter: String,
    state: String,
    /// A receipt is recorded.
    mined: bool,
    /// A transaction that is not ours consumed its nonce.
    lost_nonce: bool,
    /// An attempt is signed at its nonce.
    signed: bool,
    /// A cancel is asked for, claimed (sub-state `cancelling`) or signed
    /// (a cancel attempt at its nonce).
    cancelling: bool,
}

/// The chain and submitter of transaction `tx_id` (on any chain), if there
/// is one: whose leader an action goes to, whom the caller must be allowed
/// to act for, and whether the answering node serves its chain.
pub async fn submitter_of(
    pool: &sqlx::PgPool,
    tx_id: Uuid,
) -> StoreResult<Option<(ChainId, Address)>> {
    let row = sqlx::query!(
        r#"SELECT chain_id AS "chain_id: ChainId", submitter FROM managed_tx
            WHERE tx_id = $1"#,
        tx_id,
    )
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        let address = r
            .submitter
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("tx {tx_id}: submitter {:?}", r.submitter)))?;
        Ok((r.chain_id, address))
    })
    .transpose()
}

/// Records an operator action on `tx_id` and notifies the leader.
pub async fn request(
    pool: &sqlx::PgPool,
    chain_id: ChainId,
    tx_id: Uuid,
    action: OperatorAction,
    who: &Requester<'_>,
) -> StoreResult<ActionOutcome> {
    request_at_most_every(pool, chain_id, tx_id, action, who, None).await
}

/// [`request`], where a cancel, speed-up or re-broadcast is refused
/// ([`ActionOutcome::TooSoon`]) when the same action on the same intent was
/// recorded less than `every` ago: each speed-up or cancel raises the fees
/// by at least 10 % and each re-broadcast goes to every endpoint, so a caller
/// who may not choose the fee must not repeat them at will. Checked under
/// the intent's row lock, so concurrent requests cannot both pass.
///
/// Whoever asks, a cancel of an intent already being cancelled changes
/// nothing ([`ActionOutcome::Unchanged`]).
pub async fn request_at_most_every(
    pool: &sqlx::PgPool,
    chain_id: ChainId,
    tx_id: Uuid,
    action: OperatorAction,
    who: &Requester<'_>,
    every: Option<std::time::Duration>,
) -> StoreResult<ActionOutcome> {
    let mut tx = pool.begin().await?;
    if matches!(action, OperatorAction::Requeue) {
        // A requeue takes the nonce off the row (its trigger raises the
        // cursor's floor): the cursor's lock before the intent's, the
        // store's lock order.
        super::nonce_cursor::lock_for_intent(&mut tx, tx_id).await?;
    }
    let row = sqlx::query_as!(
        ActionTarget,
        r#"SELECT submitter, state, receipt IS NOT NULL AS "mined!",
                sub_state IS NOT DISTINCT FROM $3 AS "lost_nonce!",
                EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id AND a.nonce = m.nonce)
                    AS "signed!",
                (m.requested_action IS NOT DISTINCT FROM 'cancel'
                 OR m.sub_state IS NOT DISTINCT FROM $4
                 OR EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id
                               AND a.nonce = m.nonce AND a.kind = 'cancel')) AS "cancelling!"
           FROM managed_tx m WHERE tx_id = $1 AND chain_id = $2 FOR UPDATE"#,
        tx_id,
        chain_id as _,
        SubState::NonceConsumedExternally as _,
        SubState::Cancelling as _,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(ActionTarget {
        submitter,
        state,
        mined,
        lost_nonce,
        signed,
        cancelling,
    }) = row
    else {
        return Ok(ActionOutcome::NotFound);
    };
    let state = state
        .parse::<TxState>()
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let refuse = |reason: &str| {
        Ok(ActionOutcome::NotAllowed {
            state,
            reason: reason.to_string(),
        })
    };
    // A cancel repeated after the intent ended cancelled (a retry of one
    // whose answer was lost) is answered as a cancel in progress is.
    if action == OperatorAction::Cancel && state == TxState::Cancelled {
        return Ok(ActionOutcome::Unchanged { state });
    }
    if state.is_terminal() {
        return refuse("the transaction is final");
    }
    if mined {
        return refuse("the transaction is mined; it can no longer be replaced");
    }
    if lost_nonce && !matches!(action, OperatorAction::Cancel | OperatorAction::Requeue) {
        return refuse(
            "its nonce was consumed by a transaction that is not ours; it can only be cancelled or requeued",
        );
    }
    if action == OperatorAction::Cancel && cancelling && !lost_nonce {
        return Ok(ActionOutcome::Unchanged { state });
    }
    let bounded = !matches!(action, OperatorAction::Requeue);
    if let (true, Some(every)) = (bounded, every) {
        let since = sqlx::query_scalar!(
            "SELECT EXTRACT(EPOCH FROM now() - max(at))::float8 FROM ops_audit
              WHERE tx_id = $1 AND action = $2 AND outcome = 'done'",
            tx_id,
            format!("tx_{}", action.as_str()),
        )
        .fetch_one(&mut *tx)
        .await?;
        if let Some(since) = since {
            let since = std::time::Duration::from_secs_f64(since.max(0.0));
            if since < every {
                return Ok(ActionOutcome::TooSoon {
                    retry_after: every - since,
                });
            }
        }
    }
    let outcome = match (action, state) {
        // Holds nothing on chain (no nonce, or a nonce someone else used):
        // cancelled at once.
        (OperatorAction::Cancel, _) if state == TxState::Queued || lost_nonce => {
            sqlx::query!(
                "UPDATE managed_tx SET state = 'CANCELLED', sub_state = $3,
                        last_error = COALESCE($2, last_error), next_resubmit_at = NULL,
                        updated_at = now()
                  WHERE tx_id = $1 AND (state = 'QUEUED'
                        OR (state = 'STUCK' AND sub_state = $4))",
                tx_id,
                // `last_error` reaches clients (reads, the feed, webhooks):
                // who asked and why stay in `ops_audit`.
                CANCELLED_ON_REQUEST,
                SubState::CancelledByOperator as _,
                SubState::NonceConsumedExternally as _,
            )
            .execute(&mut *tx)
            .await?;
            super::completions::record(&mut tx, tx_id).await?;
            ActionOutcome::Cancelled
        }
        (OperatorAction::Requeue, _) if lost_nonce => {
            requeue_lost(&mut tx, tx_id).await?;
            ActionOutcome::Requeued
        }
        (OperatorAction::Requeue, _) => return refuse(
            "only an intent whose nonce a transaction that is not ours consumed can be requeued",
        ),
        (_, TxState::Queued) => return refuse("the transaction has no nonce yet"),
        // Signed but not accepted yet: it escalates like an accepted
        // one, so every action applies.
        (_, TxState::Allocated) if signed => {
            mark_requested(&mut tx, tx_id, action, who).await?;
            ActionOutcome::Requested { state }
        }
        (_, TxState::Allocated) => {
            return refuse("the transaction is being signed; try again in a moment")
        }
        _ => {
            mark_requested(&mut tx, tx_id, action, who).await?;
            ActionOutcome::Requested { state }
        }
    };
    // In the action's own transaction: the request and its audit row
    // commit together or not at all.
    let audited_action = format!("tx_{}", action.as_str());
    let entry = AuditEntry {
        actor: who.name,
        action: &audited_action,
        chain_id: Some(chain_id),
        submitter: Some(&submitter),
        reason: who.reason,
        node_id: Some(who.node_id),
        tx_id: Some(tx_id),
    };
    audit::insert(&mut tx, &entry, AuditOutcome::Done).await?;
    let wake = match outcome {
        ActionOutcome::Requested { .. } => {
            Some(format!("{chain_id}:{submitter}:{RESUBMIT_SUFFIX}"))
        }
        ActionOutcome::Requeued => Some(format!("{chain_id}:{submitter}")),
        _ => None,
    };
    if let Some(payload) = wake {
        sqlx::query!("SELECT FROM pg_notify($1, $2)", WORK_CHANNEL, payload)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// Suffix of a work notification that asks the leader to look at operator
/// requests (`<chain_id>:<address>:resubmit`).
pub const RESUBMIT_SUFFIX: &str = "resubmit";

/// Back to QUEUED (no nonce, no attempt to follow) for an intent whose
/// nonce an outsider consumed: the leader gives it a fresh nonce like any
/// new intent. Not fenced, like cancelling a QUEUED intent: it holds no
/// nonce of ours.
async fn requeue_lost(tx: &mut sqlx::PgConnection, tx_id: Uuid) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE managed_tx SET state = 'QUEUED', sub_state = $3, nonce = NULL,
                last_error = $2, tx_hash = NULL, submit_attempts = 0, last_submit_at = NULL,
                first_broadcast_at = NULL, allocated_at = NULL, retry_at = NULL, resubmits = 0,
                maybe_pooled = false, requested_action = NULL, requested_by = NULL,
                next_resubmit_at = NULL, updated_at = now()
          WHERE tx_id = $1 AND state = 'STUCK' AND sub_state = $4
            AND receipt IS NULL",
        tx_id,
        REQUEUED_ON_REQUEST,
        SubState::RequeuedByOperator as _,
        SubState::NonceConsumedExternally as _,
    )
    .execute(tx)
    .await?;
    Ok(())
}

async fn mark_requested(
    tx: &mut sqlx::PgConnection,
    tx_id: Uuid,
    action: OperatorAction,
    who: &Requester<'_>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE managed_tx SET requested_action = $2, requested_by = $3, updated_at = now()
          WHERE tx_id = $1",
        tx_id,
        action.as_str(),
        who.name.chars().take(128).collect::<String>(),
    )
    .execute(tx)
    .await?;
    Ok(())
}
