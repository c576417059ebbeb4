//! `history.retain`: finished intents leave on a schedule (see
//! `txmgr_actors::store::history_retention`), and the gauges that show how
//! large the tables are and how old the oldest final intent is.

use std::time::{Duration, Instant};

use chrono::Utc;
use sqlx::PgPool;
use txmgr_actors::{
    metrics::{
        DB_TABLE_BYTES, DB_TABLE_ROWS, HISTORY_OLDEST_FINAL_AGE, HISTORY_REMOVED, HISTORY_RETAIN,
        HISTORY_ROUNDS,
    },
    store::{
        history_retention::{self, Pace, Removed, RetentionRules, Round},
        table_stats,
    },
};

/// What the loop is told.
#[derive(Debug, Clone)]
pub(crate) struct HistoryRetention {
    /// This node's id (the ops view names the node that ran the last round).
    pub(crate) node_id: String,
    /// `history.retain`; zero keeps every intent (the loop only refreshes
    /// the gauges then).
    pub(crate) retain: Duration,
    /// `feed.audit_retain`.
    pub(crate) audit_retain: Duration,
    /// `history.interval` and `history.delete_rate`.
    pub(crate) pace: Pace,
}

/// Runs retention rounds (one node at a time across the cluster: the others
/// skip while one runs) and refreshes the table gauges after each.
pub(crate) async fn history_retention_loop(pool: PgPool, task: HistoryRetention) {
    metrics::gauge!(HISTORY_RETAIN).set(task.retain.as_secs_f64());
    for result in ["ran", "behind", "skipped", "failed"] {
        metrics::counter!(HISTORY_ROUNDS, "result" => result).increment(0);
    }
    let rules = RetentionRules {
        retain: task.retain,
        audit_retain: task.audit_retain,
        max_batches: history_retention::ROUND_BATCHES,
    };
    loop {
        let started = Instant::now();
        let (behind, removed) = if task.retain.is_zero() {
            (false, 0)
        } else {
            run_round(&pool, &task.node_id, rules).await
        };
        let took = started.elapsed();
        refresh_gauges(&pool).await;
        tokio::time::sleep(task.pace.pause_after(took, removed, behind)).await;
    }
}

/// One round; whether it stopped at its bound with more to do, and the
/// intents it removed.
async fn run_round(pool: &PgPool, node_id: &str, rules: RetentionRules) -> (bool, u64) {
    match history_retention::round(pool, node_id, rules).await {
        Ok(Round::Skipped) => {
            metrics::counter!(HISTORY_ROUNDS, "result" => "skipped").increment(1);
            (false, 0)
        }
        Ok(Round::Ran {
            removed,
            batches,
            pass_completed,
        }) => {
            count_removed(removed);
            let result = if pass_completed { "ran" } else { "behind" };
            metrics::counter!(HISTORY_ROUNDS, "result" => result).increment(1);
            if removed.intents > 0 {
                tracing::info!(target: "txmgr::history", intents = removed.intents,
                    attempts = removed.attempts, feed_rows = removed.feed_rows,
                    dead_letters = removed.dead_letters, audit_rows = removed.audit_rows,
                    batches, pass_completed, "history retention: old intents removed");
            }
            (!pass_completed, removed.intents)
        }
        Err(err) => {
            metrics::counter!(HISTORY_ROUNDS, "result" => "failed").increment(1);
            tracing::warn!(target: "txmgr::history", error = %err, "history retention round failed");
            (false, 0)
        }
    }
}

fn count_removed(removed: Removed) {
    for (table, rows) in [
        ("managed_tx", removed.intents),
        ("tx_attempt", removed.attempts),
        ("tx_completion", removed.feed_rows),
        ("webhook_dead_letter", removed.dead_letters),
        ("ops_audit", removed.audit_rows),
        ("funds_top_up", removed.top_ups),
    ] {
        metrics::counter!(HISTORY_REMOVED, "table" => table).increment(rows);
    }
}

/// The table sizes and the oldest final intent's age.
async fn refresh_gauges(pool: &PgPool) {
    match table_stats::tables(pool).await {
        Ok(tables) => {
            for table in tables {
                metrics::gauge!(DB_TABLE_ROWS, "table" => table.table.clone())
                    .set(table.rows as f64);
                metrics::gauge!(DB_TABLE_BYTES, "table" => table.table.clone())
                    .set(table.total_bytes() as f64);
            }
        }
        Err(err) => tracing::debug!(target: "txmgr::history", error = %err, "table sizes not read"),
    }
    match history_retention::status(pool).await {
        Ok(status) => {
            let age = status.oldest_final_created_at.map_or(0.0, |at| {
                (Utc::now() - at).num_milliseconds().max(0) as f64 / 1000.0
            });
            metrics::gauge!(HISTORY_OLDEST_FINAL_AGE).set(age);
        }
        Err(err) => {
            tracing::debug!(target: "txmgr::history", error = %err, "retention status not read")
        }
    }
}
