//! Submitter leases and fencing tokens (README "Data model and leases").
//!
//! Expiry is decided by the database clock only: every comparison uses
//! `now()` inside PostgreSQL, so a node with a wrong clock can neither keep a
//! lease too long nor steal one too early. The node keeps a monotonic
//! `valid_until` on top, to stop broadcasting before the database would
//! already consider the lease gone.

use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::{lease_deadline::LeaseDeadline, millis, LeaseOwner, StoreResult};
use crate::{domain::SubmitterKey, metrics::LEASE_ACQUISITIONS};

/// What a node asks for when it acquires or renews a lease.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    /// The submitter to lead.
    pub submitter: SubmitterKey,
    /// This process: `node_id` plus its instance id. Only the same owner
    /// renews; any other — the same `node_id` included — takes over.
    pub owner: LeaseOwner,
    /// How long the lease lasts from the database's `now()`.
    pub duration: Duration,
    /// Allowance for clock skew: a foreign lease is taken over only once it has
    /// been expired for this long, and the local validity ends this early.
    pub clock_skew: Duration,
}

/// Proof that this node held the lease with `token` when it was granted.
///
/// Writes made with it are still checked on the database by
/// [`FencedTx`](super::FencedTx); the deadline only tells the holder when to
/// stop acting without asking. Clones share the deadline: a renewal by the
/// node's lease keeper extends it for the leader too.
#[derive(Debug, Clone)]
pub struct LeaseGuard {
    /// The leased submitter.
    pub submitter: SubmitterKey,
    /// The holder (this process).
    pub owner: LeaseOwner,
    /// The fencing token every critical write is checked against.
    pub token: i64,
    /// Monotonic deadline: time the last successful (re)newal request was
    /// sent + duration − skew; ended when the lease was found lost.
    pub deadline: LeaseDeadline,
}

impl LeaseGuard {
    /// True while the local, conservative view says the lease still holds.
    pub fn is_locally_valid(&self) -> bool {
        self.deadline.until().is_some_and(|t| Instant::now() < t)
    }

    /// Time left before the local deadline (zero once passed or lost).
    pub fn time_left(&self) -> Duration {
        self.deadline.until().map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(Instant::now())
        })
    }

    /// Takes a renewal of this lease (same token) into the shared deadline.
    /// False when `renewed` is another lease: nothing changes then.
    pub fn absorb_renewal(&self, renewed: &LeaseGuard) -> bool {
        if renewed.token != self.token || renewed.submitter != self.submitter {
            return false;
        }
        if let Some(until) = renewed.deadline.until() {
            self.deadline.extend_to(until);
        }
        true
    }
}

/// The outcome of [`acquire_or_renew`].
#[derive(Debug, Clone)]
pub enum LeaseOutcome {
    /// No lease existed; this process now holds it with token 1.
    Acquired(LeaseGuard),
    /// This process held an unexpired lease; extended with the same token.
    Renewed(LeaseGuard),
    /// The lease had expired (ours, or another owner's for longer than the
    /// skew allowance); this process holds it now with the token incremented.
    TakenOver {
        /// The new lease.
        lease: LeaseGuard,
        /// The node id that held it before (may be this node id: our own
        /// lapsed lease, or a previous process with this `node_id`).
        previous_owner: String,
    },
    /// Another owner holds a live lease.
    NotLeader(LeaseInfo),
}

impl LeaseOutcome {
    /// The lease, when this node holds it now.
    pub fn lease(&self) -> Option<&LeaseGuard> {
        match self {
            LeaseOutcome::Acquired(lease) | LeaseOutcome::Renewed(lease) => Some(lease),
            LeaseOutcome::TakenOver { lease, .. } => Some(lease),
            LeaseOutcome::NotLeader(_) => None,
        }
    }

    /// The metric label of this outcome.
    pub fn label(&self) -> &'static str {
        match self {
            LeaseOutcome::Acquired(_) => "acquired",
            LeaseOutcome::Renewed(_) => "renewed",
            LeaseOutcome::TakenOver { .. } => "taken_over",
            LeaseOutcome::NotLeader(_) => "not_owner",
        }
    }
}

/// A lease row as the database sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The node id that holds (or last held) the lease.
    pub owner_node: String,
    /// The instance of that node (empty for rows from before instances).
    pub owner_instance: String,
    /// The current fencing token.
    pub fencing_token: i64,
    /// Time until `expires_at` by the database clock (zero when expired).
    pub expires_in: Duration,
}

impl LeaseInfo {
    /// True when `owner` (node id and instance) holds or last held it.
    pub fn is_owned_by(&self, owner: &LeaseOwner) -> bool {
        owner.is(&self.owner_node, &self.owner_instance)
    }
}

/// Acquires, renews or takes over the lease in one statement, using only the
/// database clock. "This owner" is this process (`node_id` and instance):
/// - no row → insert with token 1;
/// - owner is this owner and not expired → renew, token unchanged;
/// - owner is this owner and expired, or another owner's lease (another
///   process with the same `node_id` included) expired at least `clock_skew`
///   ago → take over, token + 1;
/// - otherwise → [`LeaseOutcome::NotLeader`].
pub async fn acquire_or_renew(pool: &PgPool, req: &LeaseRequest) -> StoreResult<LeaseOutcome> {
    acquire_or_renew_deferring(pool, req, Duration::ZERO).await
}

/// [`acquire_or_renew`] for a node that is not the submitter's preferred
/// node: it takes over another node's expired lease only `defer` later than
/// the preferred node would, so the preferred node gets it first (lease
/// balancing). Its own lease it renews or re-takes as usual.
pub async fn acquire_or_renew_deferring(
    pool: &PgPool,
    req: &LeaseRequest,
    defer: Duration,
) -> StoreResult<LeaseOutcome> {
    let outcome = acquire_or_renew_inner(pool, req, defer).await?;
    metrics::counter!(LEASE_ACQUISITIONS, "chain" => crate::metrics::chain_label(req.submitter.chain_id), "result" => outcome.label()).increment(1);
    Ok(outcome)
}

/// Hands a held lease to `to_node` (lease balancing): the row names the new
/// owner — the process registered with that node id — with an expired lease,
/// so that process re-takes it at once (token + 1) while every other waits
/// the usual clock-skew allowance. Waits for in-flight fenced transactions
/// (row lock); afterwards every fenced write with the old lease fails.
/// False when the lease was no longer held.
pub async fn hand_over(pool: &PgPool, lease: &LeaseGuard, to_node: &str) -> StoreResult<bool> {
    let result = sqlx::query!(
        "UPDATE submitter_lease
            SET owner_node = $6, expires_at = now(), updated_at = now(),
                owner_instance = COALESCE((SELECT instance FROM txmgr_node WHERE node_id = $6), '')
          WHERE chain_id = $1 AND submitter = $2 AND owner_node = $3 AND owner_instance = $4
            AND fencing_token = $5 AND expires_at > now()",
        lease.submitter.chain_id as _,
        lease.submitter.address_hex(),
        &*lease.owner.node_id,
        &*lease.owner.instance,
        lease.token,
        to_node,
    )
    .execute(pool)
    .await?;
    let handed = result.rows_affected() == 1;
    if handed {
        metrics::counter!(LEASE_ACQUISITIONS, "chain" => crate::metrics::chain_label(lease.submitter.chain_id), "result" => "handed_over").increment(1);
    }
    Ok(handed)
}

async fn acquire_or_renew_inner(
    pool: &PgPool,
    req: &LeaseRequest,
    defer: Duration,
) -> StoreResult<LeaseOutcome> {
    let chain_id = req.submitter.chain_id;
    let submitter = req.submitter.address_hex();
    let node: &str = &req.owner.node_id;
    let instance: &str = &req.owner.instance;
    // Two tries: an UPDATE that finds no row can race with another node's
    // INSERT; after the INSERT loses on the primary key the row exists and
    // the second UPDATE decides.
    for _ in 0..2 {
        let sent_at = Instant::now();
        // The sub-select locks the current row and hands its *old* values to
        // RETURNING, which is how the outcome is told apart in one statement.
        let updated = sqlx::query_as!(
            TakenRow,
            r#"UPDATE submitter_lease l
                SET fencing_token = CASE WHEN o.mine AND o.expires_at > now()
                                         THEN o.fencing_token ELSE o.fencing_token + 1 END,
                    owner_node = $3,
                    owner_instance = $6,
                    expires_at = now() + $4::bigint * interval '1 millisecond',
                    updated_at = now()
               FROM (SELECT chain_id, submitter, owner_node, fencing_token, expires_at,
                            (owner_node = $3 AND owner_instance = $6) AS mine
                       FROM submitter_lease
                      WHERE chain_id = $1 AND submitter = $2
                        FOR UPDATE) o
              WHERE l.chain_id = o.chain_id AND l.submitter = o.submitter
                AND (o.mine OR o.expires_at <= now() - $5::bigint * interval '1 millisecond')
          RETURNING l.fencing_token AS "fencing_token!", o.owner_node AS "previous_owner!",
                    (o.mine AND o.expires_at > now()) AS "renewed!""#,
            chain_id as _,
            &submitter,
            node,
            millis(req.duration),
            millis(req.clock_skew.saturating_add(defer)),
            instance,
        )
        .fetch_optional(pool)
        .await?;
        if let Some(taken) = updated {
            let lease = guard(req, taken.fencing_token, sent_at);
            return Ok(if taken.renewed {
                LeaseOutcome::Renewed(lease)
            } else {
                LeaseOutcome::TakenOver {
                    lease,
                    previous_owner: taken.previous_owner,
                }
            });
        }

        let inserted = sqlx::query_scalar!(
            "INSERT INTO submitter_lease
                    (chain_id, submitter, owner_node, owner_instance, fencing_token, expires_at)
             VALUES ($1, $2, $3, $5, 1, now() + $4::bigint * interval '1 millisecond')
             ON CONFLICT (chain_id, submitter) DO NOTHING
             RETURNING fencing_token",
            chain_id as _,
            &submitter,
            node,
            millis(req.duration),
            instance,
        )
        .fetch_optional(pool)
        .await?;
        if let Some(token) = inserted {
            return Ok(LeaseOutcome::Acquired(guard(req, token, sent_at)));
        }

        if let Some(info) = current_lease(pool, req.submitter).await? {
            if !info.is_owned_by(&req.owner) && !info.expires_in.is_zero() {
                return Ok(LeaseOutcome::NotLeader(info));
            }
        }
    }
    // The row changed hands twice while we looked: someone else is active.
    let info = current_lease(pool, req.submitter)
        .await?
        .unwrap_or(LeaseInfo {
            owner_node: String::new(),
            owner_instance: String::new(),
            fencing_token: 0,
            expires_in: Duration::ZERO,
        });
    Ok(LeaseOutcome::NotLeader(info))
}

/// What the renew-or-take-over `UPDATE` returns.
struct TakenRow {
    /// The token now (unchanged on a renewal).
    fencing_token: i64,
    /// The node id that held the row before.
    previous_owner: String,
    /// The row was ours and live: a renewal, not a take-over.
    renewed: bool,
}

fn guard(req: &LeaseRequest, token: i64, sent_at: Instant) -> LeaseGuard {
    LeaseGuard {
        submitter: req.submitter,
        owner: req.owner.clone(),
        token,
        deadline: LeaseDeadline::new(sent_at + req.duration.saturating_sub(req.clock_skew)),
    }
}

/// Reads the lease row of a submitter, if any.
pub async fn current_lease(
    pool: &PgPool,
    submitter: SubmitterKey,
) -> StoreResult<Option<LeaseInfo>> {
    let row = sqlx::query_as!(
        LeaseRow,
        r#"SELECT owner_node, owner_instance, fencing_token,
                GREATEST(0, (EXTRACT(EPOCH FROM (expires_at - now())) * 1000)::bigint)
                    AS "expires_in_ms!"
           FROM submitter_lease WHERE chain_id = $1 AND submitter = $2"#,
        submitter.chain_id as _,
        submitter.address_hex(),
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| LeaseInfo {
        owner_node: row.owner_node,
        owner_instance: row.owner_instance,
        fencing_token: row.fencing_token,
        expires_in: Duration::from_millis(u64::try_from(row.expires_in_ms).unwrap_or(0)),
    }))
}

struct LeaseRow {
    owner_node: String,
    owner_instance: String,
    fencing_token: i64,
    expires_in_ms: i64,
}

/// Gives the lease up at once (graceful shutdown, hand-over), so another
/// process can take over without waiting for expiry. Waits for in-flight
/// fenced transactions of the holder (row lock). Returns false when this
/// process no longer held it with this token: nothing was changed then.
pub async fn release(pool: &PgPool, lease: &LeaseGuard) -> StoreResult<bool> {
    // The epoch is "long expired" for every take-over rule, and unlike
    // '-infinity' it still decodes as a timestamp.
    let result = sqlx::query!(
        "UPDATE submitter_lease SET expires_at = 'epoch', updated_at = now()
          WHERE chain_id = $1 AND submitter = $2 AND owner_node = $3 AND owner_instance = $4
            AND fencing_token = $5",
        lease.submitter.chain_id as _,
        lease.submitter.address_hex(),
        &*lease.owner.node_id,
        &*lease.owner.instance,
        lease.token,
    )
    .execute(pool)
    .await?;
    let released = result.rows_affected() == 1;
    if released {
        metrics::counter!(LEASE_ACQUISITIONS, "chain" => crate::metrics::chain_label(lease.submitter.chain_id), "result" => "released").increment(1);
    }
    Ok(released)
}

/// Suffix of a work notification that tells the named node it was handed a
/// lease (`<chain_id>:<address>:lease`).
pub const LEASE_SUFFIX: &str = "lease";

/// Wakes the node a lease was handed to (every node listens; only the
/// preferred one acts on it at once, the others defer).
pub async fn notify_handover(pool: &PgPool, submitter: SubmitterKey) -> StoreResult<()> {
    sqlx::query!(
        "SELECT FROM pg_notify($1, $2)",
        super::intents::WORK_CHANNEL,
        format!(
            "{}:{}:{LEASE_SUFFIX}",
            submitter.chain_id,
            submitter.address_hex()
        ),
    )
    .execute(pool)
    .await?;
    Ok(())
}
