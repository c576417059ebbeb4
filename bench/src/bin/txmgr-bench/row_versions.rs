//! Row versions the engine writes per intent (`pg_stat_user_tables` of the
//! bench database): every insert, update and delete is a new tuple version
//! for PostgreSQL to write, WAL-log, index (unless HOT) and vacuum.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::Serialize;

use crate::node::BenchDb;

/// Cumulative tuple counts per table at one instant.
#[derive(Debug, Clone, Default)]
pub(crate) struct TupleCounts {
    /// `(inserted, updated, HOT-updated, deleted)` per table.
    tables: BTreeMap<String, (i64, i64, i64, i64)>,
}

/// One table's writes over a phase.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableWrites {
    /// The table.
    pub(crate) table: String,
    /// Inserts per intent.
    pub(crate) inserts_per_intent: f64,
    /// Updates per intent.
    pub(crate) updates_per_intent: f64,
    /// Share of the updates that were HOT (no index entry written).
    pub(crate) hot_ratio: f64,
    /// Deletes per intent.
    pub(crate) deletes_per_intent: f64,
}

/// Tables the engine writes on a clock, not per intent (lease renewals,
/// heartbeats, cursors): shown, not counted per intent.
const HOUSEKEEPING: &[&str] = &["submitter_lease", "txmgr_node", "webhook_cursor"];

/// The cluster's WAL position in bytes. Read right at a phase's start and
/// end (WAL, unlike the statistics, does not lag).
pub(crate) async fn wal_position(db: &BenchDb) -> anyhow::Result<f64> {
    db.count_own_query();
    sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8")
        .fetch_one(&db.pool)
        .await
        .context("reading the WAL position")
}

/// A session publishes its statistics at most once a second, and an idle
/// one within 10 s: the closing reading waits this long after the phase.
pub(crate) const STATS_SETTLE: std::time::Duration = std::time::Duration::from_secs(11);

/// What a phase wrote.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RowVersions {
    /// Inserted + updated + deleted tuples per intent, every table but the
    /// housekeeping ones.
    pub(crate) per_intent: f64,
    /// Share of those updates that were HOT.
    pub(crate) hot_ratio: f64,
    /// The tables written, most written first.
    pub(crate) tables: Vec<TableWrites>,
}

impl TupleCounts {
    /// Reads the bench database's table statistics. They lag like
    /// `pg_stat_database` (a session publishes at most once a second).
    pub(crate) async fn take(db: &BenchDb) -> anyhow::Result<TupleCounts> {
        db.count_own_query();
        let rows: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
               FROM pg_stat_user_tables",
        )
        .fetch_all(&db.pool)
        .await
        .context("reading pg_stat_user_tables")?;
        Ok(TupleCounts {
            tables: rows
                .into_iter()
                .map(|(t, i, u, h, d)| (t, (i, u, h, d)))
                .collect(),
        })
    }

    /// The writes since `before`, per intent of `count`.
    pub(crate) fn since(&self, before: &TupleCounts, count: usize) -> RowVersions {
        let intents = count.max(1) as f64;
        let ratio = |hot: i64, updates: i64| {
            if updates > 0 {
                hot as f64 / updates as f64
            } else {
                0.0
            }
        };
        let (mut all, mut updates, mut hot) = (0i64, 0i64, 0i64);
        let mut tables = Vec::new();
        for (table, (i, u, h, d)) in &self.tables {
            let (bi, bu, bh, bd) = before.tables.get(table).copied().unwrap_or_default();
            let (i, u, h, d) = (i - bi, u - bu, h - bh, d - bd);
            if i + u + d == 0 {
                continue;
            }
            if !HOUSEKEEPING.contains(&table.as_str()) {
                all += i + u + d;
                updates += u;
                hot += h;
            }
            tables.push(TableWrites {
                table: table.clone(),
                inserts_per_intent: i as f64 / intents,
                updates_per_intent: u as f64 / intents,
                hot_ratio: ratio(h, u),
                deletes_per_intent: d as f64 / intents,
            });
        }
        tables.sort_by(|a, b| {
            let total = |t: &TableWrites| {
                t.inserts_per_intent + t.updates_per_intent + t.deletes_per_intent
            };
            total(b).total_cmp(&total(a))
        });
        RowVersions {
            per_intent: all as f64 / intents,
            hot_ratio: ratio(hot, updates),
            tables,
        }
    }
}
