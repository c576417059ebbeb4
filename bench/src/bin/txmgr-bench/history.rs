//! Phase "history" (`--history N,…`): the txmgr phases on a database that
//! already holds N final intents, side by side with the same phases on the
//! empty database of the run (README "Benchmark", issue 48).
//!
//! ```text
//!  per N:  fresh database ─► bench/sql/history.sql (N final intents over
//!          1,000 submitters × 3 chains, 31 days, with attempts, feed and
//!          audit rows; generate_series, no API) ─► VACUUM, CHECKPOINT
//!          ─► sizes ─► [drop the OS page cache] ─► one, many, ack
//!          ─► many again while history retention (retain 30 days) deletes
//!             the oldest day
//!          ─► [one, many, ack on a fresh empty database again]
//! ```

use std::{
    str::FromStr,
    time::{Duration, Instant},
};

use anyhow::Context;
use serde::Serialize;
use sqlx::{ConnectOptions, Connection};
use txmgr_actors::store::table_stats;

use crate::{
    anvil::Anvil,
    history_retention::RetentionLoop,
    keys::TxmgrKeys,
    node::BenchDb,
    report::{AckPhase, TxmgrPhase},
    session::{run_txmgr, RpcTarget},
    Args,
};

/// The loader (tokens `:N`, `:SUBMITTERS`, `:CHAINS`, `:DAYS`).
const LOAD_SQL: &str = include_str!("../../../sql/history.sql");
/// Run after the load, as a statement of its own.
const VACUUM_SQL: &str = include_str!("../../../sql/history-vacuum.sql");

/// Submitters the history is spread over (per chain).
const SUBMITTERS: u64 = 1_000;
/// Chains of the history (ids 900001…, never the bench's live chain).
const CHAINS: u64 = 3;
/// Days the history spans; retention keeps 30, so one day is due.
pub(crate) const DAYS: u64 = 31;
/// What retention keeps during the retention run.
pub(crate) const RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// One table's size after the load.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableSize {
    /// Table name.
    pub(crate) table: String,
    /// Rows (estimate after ANALYZE).
    pub(crate) rows: i64,
    /// Heap bytes.
    pub(crate) heap_bytes: i64,
    /// TOAST bytes.
    pub(crate) toast_bytes: i64,
    /// Index bytes.
    pub(crate) index_bytes: i64,
    /// Its largest index and that index's bytes.
    pub(crate) largest_index: Option<(String, i64)>,
}

/// The retention run: the "many" phases again while retention deletes.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RetentionRun {
    /// The phases, measured while retention ran.
    pub(crate) many: Vec<TxmgrPhase>,
    /// Intents retention removed while they ran.
    pub(crate) removed_intents: u64,
    /// Rounds it ran (each up to `ROUND_BATCHES` batches of 1,000).
    pub(crate) rounds: u64,
    /// `removed_intents` over the phases' wall time.
    pub(crate) removed_per_s: f64,
}

/// The empty database's phases, run again after a size's.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EmptyAgain {
    /// Phase "one".
    pub(crate) one: Option<TxmgrPhase>,
    /// Phases "many".
    pub(crate) many: Vec<TxmgrPhase>,
    /// The open-loop creates.
    pub(crate) ack: Option<AckPhase>,
}

/// One history size.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HistoryRun {
    /// Final intents loaded.
    pub(crate) intents: u64,
    /// Seconds the load took (rows, indexes, VACUUM).
    pub(crate) load_s: f64,
    /// The tables after the load, largest first.
    pub(crate) tables: Vec<TableSize>,
    /// Bytes of `managed_tx`, `tx_attempt`, `tx_completion` and `ops_audit`
    /// (heap, TOAST, indexes) per loaded intent.
    pub(crate) bytes_per_intent: f64,
    /// The largest index of the database and its bytes.
    pub(crate) largest_index: Option<(String, i64)>,
    /// The database's bytes over the machine's memory (`MemTotal`).
    pub(crate) database_vs_memory: f64,
    /// `shared_buffers` of the server.
    pub(crate) shared_buffers: String,
    /// The OS page cache was dropped before the phases.
    pub(crate) caches_dropped: bool,
    /// Phase "one" on this database.
    pub(crate) one: Option<TxmgrPhase>,
    /// Phases "many" on this database.
    pub(crate) many: Vec<TxmgrPhase>,
    /// The open-loop creates on this database.
    pub(crate) ack: Option<AckPhase>,
    /// "one" and "many" again after the OS page cache was dropped
    /// (`--history-drop-caches`).
    pub(crate) cold: Vec<TxmgrPhase>,
    /// "many" again while retention deletes the oldest day.
    pub(crate) retention: Option<RetentionRun>,
    /// The phases on a fresh empty database after this size's
    /// (`--history-rebaseline`).
    pub(crate) empty_again: Option<EmptyAgain>,
    /// The sustained run (`--soak`, last size only).
    pub(crate) soak: Option<crate::history_soak::Soak>,
}

pub(crate) async fn run(
    args: &Args,
    keys: &[[TxmgrKeys; 5]],
    anvil: &Anvil,
    admin_url: &str,
) -> anyhow::Result<Vec<HistoryRun>> {
    let mut runs = Vec::new();
    let last = args.history.len().saturating_sub(1);
    for (i, (size, keys)) in args.history.iter().zip(keys).enumerate() {
        let db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let soak = args.soak.filter(|_| i == last);
        let run = run_one(args, *size, keys, soak, anvil, &db, admin_url).await;
        if let Err(e) = db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        let run = run?;
        // Printed at once as well: a later phase that fails must not take
        // an hour's load and measurement with it.
        match serde_json::to_string(&run) {
            Ok(json) => eprintln!("txmgr-bench: history run: {json}"),
            Err(e) => eprintln!("txmgr-bench: warning: history run: {e}"),
        }
        runs.push(run);
    }
    Ok(runs)
}

async fn run_one(
    args: &Args,
    intents: u64,
    [plain_keys, cold_keys, retention_keys, soak_keys, again_keys]: &[TxmgrKeys; 5],
    soak: Option<Duration>,
    anvil: &Anvil,
    db: &BenchDb,
    admin_url: &str,
) -> anyhow::Result<HistoryRun> {
    eprintln!("txmgr-bench: loading a history of {intents} final intents…");
    let started = Instant::now();
    load(db, intents).await?;
    let load_s = started.elapsed().as_secs_f64();
    eprintln!("txmgr-bench: history loaded in {load_s:.0} s");
    let (tables, shared_buffers) = sizes(db).await?;
    let history_bytes: i64 = tables
        .iter()
        .filter(|t| {
            ["managed_tx", "tx_attempt", "tx_completion", "ops_audit"].contains(&t.table.as_str())
        })
        .map(|t| t.heap_bytes + t.toast_bytes + t.index_bytes)
        .sum();
    let all_bytes: i64 = tables
        .iter()
        .map(|t| t.heap_bytes + t.toast_bytes + t.index_bytes)
        .sum();
    let largest_index = tables
        .iter()
        .filter_map(|t| t.largest_index.clone())
        .max_by_key(|(_, bytes)| *bytes);
    let rpc = RpcTarget {
        url: anvil.rpc_url(),
        ca_file: None,
    };
    let phases = run_txmgr(args, plain_keys, &rpc, anvil, db, true, false).await?;
    let caches_dropped = args.history_drop_caches && drop_page_cache();
    let cold = if caches_dropped {
        let cold = run_txmgr(args, cold_keys, &rpc, anvil, db, false, false).await?;
        cold.one.into_iter().chain(cold.many).collect()
    } else {
        Vec::new()
    };
    let retention = if args.history_retention {
        Some(with_retention(args, retention_keys, &rpc, anvil, db).await?)
    } else {
        None
    };
    let empty_again = if args.history_rebaseline {
        Some(empty_again(args, again_keys, &rpc, anvil, admin_url).await?)
    } else {
        None
    };
    // A failed soak costs its own figures only, not the load's and the
    // phases' (an hour at 10 million).
    let soak = match soak {
        Some(duration) => match crate::history_soak::sustained(
            args, soak_keys, &rpc, anvil, db, intents, duration,
        )
        .await
        {
            Ok(soak) => Some(soak),
            Err(e) => {
                eprintln!("txmgr-bench: warning: the soak failed: {e:#}");
                None
            }
        },
        None => None,
    };
    Ok(HistoryRun {
        intents,
        load_s,
        tables,
        bytes_per_intent: history_bytes as f64 / intents.max(1) as f64,
        largest_index,
        database_vs_memory: all_bytes as f64 / mem_total_bytes().max(1) as f64,
        shared_buffers,
        caches_dropped,
        one: phases.one,
        many: phases.many,
        ack: phases.ack,
        cold,
        retention,
        empty_again,
        soak,
    })
}

/// The plain phases on a fresh empty database (dropped after).
async fn empty_again(
    args: &Args,
    keys: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    admin_url: &str,
) -> anyhow::Result<EmptyAgain> {
    let db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
    let phases = run_txmgr(args, keys, rpc, anvil, &db, true, false).await;
    if let Err(e) = db.drop_db().await {
        eprintln!("txmgr-bench: warning: {e:#}");
    }
    let phases = phases?;
    Ok(EmptyAgain {
        one: phases.one,
        many: phases.many,
        ack: phases.ack,
    })
}

/// Loads the history: the script with its tokens replaced, then VACUUM.
async fn load(db: &BenchDb, intents: u64) -> anyhow::Result<()> {
    let script = LOAD_SQL
        .replace(":SUBMITTERS", &SUBMITTERS.to_string())
        .replace(":CHAINS", &CHAINS.to_string())
        .replace(":DAYS", &DAYS.to_string())
        .replace(":N", &intents.to_string());
    // The load runs for minutes by design: without this, sqlx warns of a
    // slow statement and prints the whole 20 KB script into the report.
    let options = sqlx::postgres::PgConnectOptions::from_str(&db.url)
        .context("the database URL")?
        .disable_statement_logging();
    let mut conn = sqlx::postgres::PgConnection::connect_with(&options)
        .await
        .context("connecting to load the history")?;
    sqlx::raw_sql(&script)
        .execute(&mut conn)
        .await
        .context("loading the history (bench/sql/history.sql)")?;
    for statement in VACUUM_SQL
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        sqlx::raw_sql(statement)
            .execute(&mut conn)
            .await
            .with_context(|| format!("after the load: {statement}"))?;
    }
    // The load's dirty pages written out now, not during the phases
    // (superuser or pg_checkpoint; without it the phases pay for them).
    if let Err(e) = sqlx::raw_sql("CHECKPOINT").execute(&mut conn).await {
        eprintln!("txmgr-bench: warning: CHECKPOINT after the load: {e}");
    }
    sqlx::Connection::close(conn).await.ok();
    Ok(())
}

/// Every table's size, and `shared_buffers`.
async fn sizes(db: &BenchDb) -> anyhow::Result<(Vec<TableSize>, String)> {
    let tables = table_stats::tables(&db.pool)
        .await
        .context("reading table sizes")?
        .into_iter()
        .map(|t| TableSize {
            largest_index: t.indexes.first().cloned(),
            table: t.table,
            rows: t.rows,
            heap_bytes: t.heap_bytes,
            toast_bytes: t.toast_bytes,
            index_bytes: t.index_bytes,
        })
        .collect();
    let shared_buffers: String = sqlx::query_scalar("SELECT current_setting('shared_buffers')")
        .fetch_one(&db.pool)
        .await
        .context("reading shared_buffers")?;
    Ok((tables, shared_buffers))
}

/// "many" again (other keys) while a retention loop runs as a node's would
/// ([`RetentionLoop`]).
async fn with_retention(
    args: &Args,
    keys: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    db: &BenchDb,
) -> anyhow::Result<RetentionRun> {
    let retention = RetentionLoop::start(db, |_| RETAIN).await?;
    let started = Instant::now();
    let phases = run_txmgr(args, keys, rpc, anvil, db, false, false).await;
    let elapsed = started.elapsed().as_secs_f64();
    let removal = retention.stop().await?;
    let phases = phases?;
    Ok(RetentionRun {
        many: phases.one.into_iter().chain(phases.many).collect(),
        removed_intents: removal.intents,
        rounds: removal.rounds,
        removed_per_s: removal.intents as f64 / elapsed.max(1e-9),
    })
}

/// `sync` and drop the OS page cache (needs root); whether it was dropped.
fn drop_page_cache() -> bool {
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    let dropped = std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok();
    if !dropped {
        eprintln!("txmgr-bench: warning: cannot drop the page cache (root needed)");
    }
    synced && dropped
}

/// The machine's memory from `/proc/meminfo`.
fn mem_total_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("MemTotal:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
