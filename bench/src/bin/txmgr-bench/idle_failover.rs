//! The idle phase's fail-over step: node A leads the used submitters, each
//! with one unmined intent; node B starts on the same database; A is
//! SIGKILLed; the bench times until B holds every lease A held with open
//! work, next to the bound `lease.duration + lease.clock_skew_allowance`.
//!
//! A lease without open work is not counted: a node starts a submitter only
//! for work (a create, a NOTIFY, or discovery of open intents whose lease is
//! free), so such a lease is taken over by the next create, not by B alone.

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::{
    anvil::CHAIN_ID,
    daemon::Daemon,
    idle::{IdleRun, OPEN_STATES},
    idle_report::IdleFailover,
    load,
};

/// How often the lease table is read after the kill.
const LEASE_POLL: Duration = Duration::from_millis(50);

/// Least time the fail-over intents may take to be TRACKING.
const MIN_TRACKING_TIMEOUT: Duration = Duration::from_secs(120);

/// Slack over the expected take-over time before the bench gives up.
const TAKE_OVER_SLACK: Duration = Duration::from_secs(60);

/// Runs the step; node A is killed by it.
pub(crate) async fn run(idle: &IdleRun<'_>, a: &mut Daemon) -> anyhow::Result<IdleFailover> {
    let config = idle.config()?;
    let bound = config.lease.duration + config.lease.clock_skew_allowance;
    let discovery = config.node.discovery_interval;

    let started = Instant::now();
    idle.give_work(a, "idle-failover").await?;
    let deadline = started + idle.args.tracking_timeout.max(MIN_TRACKING_TIMEOUT);
    load::wait_tracking(idle.db, &idle.used_hex, idle.used.len(), deadline).await?;

    let mut b = idle.start_node("idle-b")?;
    let b_ready = b
        .wait_ready(
            &idle.client,
            idle.configured_pairs(),
            idle.args.idle.idle_ready_timeout,
        )
        .await?;

    let leases = leases_of(idle, &a.node_id).await?;
    let targets: Vec<String> = leases
        .iter()
        .filter(|(_, open)| *open)
        .map(|(submitter, _)| submitter.clone())
        .collect();
    let killed_at = Instant::now();
    a.kill().await;

    let give_up = killed_at + bound.saturating_mul(2) + discovery + TAKE_OVER_SLACK;
    let mut first_taken = None;
    let all_taken = loop {
        let held = held_by(idle, &b.node_id, &targets).await?;
        if held > 0 {
            first_taken.get_or_insert_with(|| killed_at.elapsed());
        }
        if held >= targets.len() {
            break killed_at.elapsed();
        }
        if Instant::now() >= give_up {
            bail!(
                "fail-over: node {} holds {held} of {} leases {:.0} s after the kill",
                b.node_id,
                targets.len(),
                killed_at.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(LEASE_POLL).await;
    };
    b.kill().await;
    Ok(IdleFailover {
        b_ready,
        leases_of_a: leases.len(),
        with_open_work: targets.len(),
        first_taken_s: first_taken.unwrap_or(all_taken).as_secs_f64(),
        all_taken_s: all_taken.as_secs_f64(),
        bound_s: bound.as_secs_f64(),
        discovery_interval_s: discovery.as_secs_f64(),
    })
}

/// Live leases of `node_id`, each with whether its submitter has open work.
async fn leases_of(idle: &IdleRun<'_>, node_id: &str) -> anyhow::Result<Vec<(String, bool)>> {
    idle.db.count_own_query();
    Ok(sqlx::query_as(
        "SELECT l.submitter,
                EXISTS (SELECT 1 FROM managed_tx m
                         WHERE m.chain_id = l.chain_id AND m.submitter = l.submitter
                           AND m.state = ANY($3))
           FROM submitter_lease l
          WHERE l.chain_id = $1 AND l.owner_node = $2 AND l.expires_at > now()",
    )
    .bind(i64::try_from(CHAIN_ID).unwrap_or(i64::MAX))
    .bind(node_id)
    .bind(&OPEN_STATES[..])
    .fetch_all(&idle.db.pool)
    .await?)
}

/// How many of `submitters` have their lease held by `node_id`.
async fn held_by(
    idle: &IdleRun<'_>,
    node_id: &str,
    submitters: &[String],
) -> anyhow::Result<usize> {
    idle.db.count_own_query();
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM submitter_lease
          WHERE chain_id = $1 AND owner_node = $2 AND submitter = ANY($3)",
    )
    .bind(i64::try_from(CHAIN_ID).unwrap_or(i64::MAX))
    .bind(node_id)
    .bind(submitters)
    .fetch_one(&idle.db.pool)
    .await?;
    Ok(usize::try_from(held).unwrap_or(0))
}
