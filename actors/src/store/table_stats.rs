//! Sizes of txmgr's tables and indexes (`txmgr db stats`, the
//! `txmgr_db_table_*` gauges): from PostgreSQL's catalog and statistics,
//! never a count of the rows, so it costs the same at any size.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::StoreResult;

/// One table of the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct TableStats {
    /// Table name.
    pub table: String,
    /// Rows, PostgreSQL's estimate (`reltuples`, as of the last vacuum or
    /// analyze; 0 before the first).
    pub rows: i64,
    /// Dead row versions waiting for vacuum (`n_dead_tup`).
    pub dead_rows: i64,
    /// Bytes of the table's own pages.
    pub heap_bytes: i64,
    /// Bytes of its TOAST table (large values stored apart).
    pub toast_bytes: i64,
    /// Bytes of all its indexes.
    pub index_bytes: i64,
    /// When autovacuum last vacuumed it.
    pub last_autovacuum: Option<DateTime<Utc>>,
    /// Its indexes, largest first: name and bytes.
    pub indexes: Vec<(String, i64)>,
}

impl TableStats {
    /// Heap, TOAST and indexes.
    pub fn total_bytes(&self) -> i64 {
        self.heap_bytes + self.toast_bytes + self.index_bytes
    }
}

/// Every table of the current schema, largest first.
pub async fn tables(pool: &PgPool) -> StoreResult<Vec<TableStats>> {
    let rows = sqlx::query!(
        r#"SELECT c.relname::text AS "table!",
                  greatest(c.reltuples, 0)::bigint AS "rows!",
                  COALESCE(s.n_dead_tup, 0) AS "dead_rows!",
                  pg_relation_size(c.oid) AS "heap_bytes!",
                  COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0) AS "toast_bytes!",
                  pg_indexes_size(c.oid) AS "index_bytes!",
                  s.last_autovacuum,
                  COALESCE((SELECT array_agg(i.relname::text ORDER BY pg_relation_size(i.oid) DESC)
                              FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                             WHERE x.indrelid = c.oid), '{}') AS "index_names!",
                  COALESCE((SELECT array_agg(pg_relation_size(i.oid) ORDER BY pg_relation_size(i.oid) DESC)
                              FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                             WHERE x.indrelid = c.oid), '{}') AS "index_bytes_each!"
             FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
            WHERE n.nspname = current_schema() AND c.relkind = 'r'
              AND c.relname <> '_sqlx_migrations'
            ORDER BY pg_total_relation_size(c.oid) DESC, c.relname"#,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| TableStats {
            table: row.table,
            rows: row.rows,
            dead_rows: row.dead_rows,
            heap_bytes: row.heap_bytes,
            toast_bytes: row.toast_bytes,
            index_bytes: row.index_bytes,
            last_autovacuum: row.last_autovacuum,
            indexes: row
                .index_names
                .into_iter()
                .zip(row.index_bytes_each)
                .collect(),
        })
        .collect())
}
