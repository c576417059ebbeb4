//! Which relations a phase's WAL went to (`pg_walinspect`, PostgreSQL
//! 15+): the bytes and full-page images per intent of the heaps and indexes
//! written most. A WAL figure that grows with history names its cause here
//! (an index whose inserts land on random pages logs a whole 8 KB page
//! after every checkpoint).

use anyhow::Context;
use serde::Serialize;

use crate::node::BenchDb;

/// One relation's share of a phase's WAL.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RelationWal {
    /// Table or index name (`other`: records without a block of this
    /// database, e.g. commits).
    pub(crate) relation: String,
    /// WAL bytes per intent, full-page images included.
    pub(crate) bytes_per_intent: f64,
    /// Of which full-page images.
    pub(crate) fpi_bytes_per_intent: f64,
    /// Full-page images per intent.
    pub(crate) fpis_per_intent: f64,
}

/// Relations listed per phase, most WAL first.
const SHOWN: i64 = 8;

/// The cluster's WAL insert position (`pg_lsn` text), read with the
/// phase's byte count.
pub(crate) async fn position(db: &BenchDb) -> anyhow::Result<String> {
    db.count_own_query();
    sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(&db.pool)
        .await
        .context("reading the WAL position")
}

/// The WAL between `from` and `to` by relation of the first block each
/// record names, per intent. Empty (with a note) when `pg_walinspect`
/// cannot be used (not installed, or not a superuser).
pub(crate) async fn by_relation(
    db: &BenchDb,
    from: &str,
    to: &str,
    intents: usize,
) -> Vec<RelationWal> {
    match read(db, from, to, intents).await {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("txmgr-bench: no WAL breakdown by relation: {e:#}");
            Vec::new()
        }
    }
}

async fn read(
    db: &BenchDb,
    from: &str,
    to: &str,
    intents: usize,
) -> anyhow::Result<Vec<RelationWal>> {
    db.count_own_query();
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        .execute(&db.pool)
        .await
        .context("CREATE EXTENSION pg_walinspect")?;
    db.count_own_query();
    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        r"WITH r AS (
              SELECT record_length, fpi_length,
                     substring(block_ref FROM 'rel \d+/(\d+)/')::oid AS db,
                     substring(block_ref FROM 'rel \d+/\d+/(\d+)')::oid AS filenode
                FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn))
          SELECT COALESCE(CASE WHEN db = (SELECT oid FROM pg_database
                                           WHERE datname = current_database())
                               THEN pg_filenode_relation(0, filenode)::regclass::text END,
                          'other') AS relation,
                 sum(record_length)::int8, sum(fpi_length)::int8,
                 count(*) FILTER (WHERE fpi_length > 0)
            FROM r GROUP BY 1 ORDER BY 2 DESC LIMIT $3",
    )
    .bind(from)
    .bind(to)
    .bind(SHOWN)
    .fetch_all(&db.pool)
    .await
    .context("pg_get_wal_records_info")?;
    let per = intents.max(1) as f64;
    Ok(rows
        .into_iter()
        .map(|(relation, bytes, fpi_bytes, fpis)| RelationWal {
            relation,
            bytes_per_intent: bytes as f64 / per,
            fpi_bytes_per_intent: fpi_bytes as f64 / per,
            fpis_per_intent: fpis as f64 / per,
        })
        .collect())
}

/// One line for a report: `name bytes (FPI share)` of each relation.
pub(crate) fn summary(rows: &[RelationWal]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "{} {:.0} B ({:.2} FPI, {:.0} B)",
                r.relation, r.bytes_per_intent, r.fpis_per_intent, r.fpi_bytes_per_intent
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
