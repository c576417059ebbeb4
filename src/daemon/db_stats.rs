//! `txmgr db stats`: every table's rows and bytes, its largest index, and
//! history retention's progress, printed for an operator (README "Data
//! model and leases": sizing).

use std::fmt::Write as _;

use anyhow::Context;
use chrono::Utc;
use txmgr_actors::store::{
    history_retention::{self, RetentionStatus},
    table_stats::{self, TableStats},
};

use super::connect;
use crate::config::Config;

/// Connects with `config`'s `[database]` and prints the report.
pub async fn print_db_stats(config: &Config) -> anyhow::Result<()> {
    let pool = connect(config).await?;
    let tables = table_stats::tables(&pool)
        .await
        .context("reading table sizes")?;
    let status = history_retention::status(&pool)
        .await
        .context("reading history retention")?;
    let memory: (String, String) = sqlx::query_as(
        "SELECT current_setting('shared_buffers'), current_setting('effective_cache_size')",
    )
    .fetch_one(&pool)
    .await
    .context("reading the server's memory settings")?;
    print!(
        "{}",
        report(
            &tables,
            &status,
            config.history.effective_retain(&config.feed),
            &memory
        )
    );
    Ok(())
}

/// The report's text.
fn report(
    tables: &[TableStats],
    status: &RetentionStatus,
    retain: std::time::Duration,
    (shared_buffers, effective_cache_size): &(String, String),
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}  largest index",
        "table", "rows (est.)", "dead", "heap", "toast", "indexes", "total"
    );
    let mut total = 0i64;
    for t in tables {
        total += t.total_bytes();
        let largest = t
            .indexes
            .first()
            .map(|(name, bytes)| format!("{name} ({})", size(*bytes)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<26} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}  {largest}",
            t.table,
            t.rows,
            t.dead_rows,
            size(t.heap_bytes),
            size(t.toast_bytes),
            size(t.index_bytes),
            size(t.total_bytes()),
        );
    }
    let _ = writeln!(out, "{:<26} {:>78}", "all tables", size(total));
    let intents = tables
        .iter()
        .find(|t| t.table == "managed_tx")
        .map_or(0, |t| t.rows);
    if intents > 0 {
        let _ = writeln!(
            out,
            "bytes per intent (all tables / managed_tx rows): {}",
            total / intents
        );
    }
    let _ = writeln!(
        out,
        "server memory: shared_buffers {shared_buffers}, effective_cache_size {effective_cache_size}"
    );
    let _ = writeln!(out);
    let when =
        |at: Option<chrono::DateTime<Utc>>| at.map_or("never".to_owned(), |at| at.to_rfc3339());
    if retain.is_zero() {
        let _ = writeln!(out, "history retention: off (history.retain = 0s)");
    } else {
        let _ = writeln!(
            out,
            "history retention: history.retain = {}",
            humantime::format_duration(retain)
        );
    }
    let _ = writeln!(
        out,
        "  running pass cutoff:  {}",
        status
            .pass_cutoff
            .map_or("none".to_owned(), |at| at.to_rfc3339())
    );
    let _ = writeln!(
        out,
        "  last completed pass:  cutoff {}, ended {}",
        when(status.completed_cutoff),
        when(status.completed_at)
    );
    let _ = writeln!(
        out,
        "  last round:           {} on {} ({} intents)",
        when(status.last_round_at),
        status.last_round_node.as_deref().unwrap_or("-"),
        status.last_round_rows
    );
    let _ = writeln!(
        out,
        "  removed in total:     {} intents",
        status.removed_total
    );
    let _ = writeln!(
        out,
        "  oldest final intent:  {}",
        when(status.oldest_final_created_at)
    );
    out
}

/// Bytes in a short human unit.
fn size(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(8192), "8.0 kB");
        assert_eq!(size(3 * 1024 * 1024 * 1024 / 2), "1.5 GB");
    }
}
