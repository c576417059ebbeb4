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
//! ```

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use txmgr_actors::store::{
    history_retention::{self, RetentionRules, Round},
    table_stats,
};

use crate::{
    anvil::Anvil,
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
const DAYS: u64 = 31;
/// What retention keeps during the retention run.
const RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);

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
    /// Rounds it ran (each up to 20 batches of 1,000).
    pub(crate) rounds: u64,
    /// `removed_intents` over the phases' wall time.
    pub(crate) removed_per_s: f64,
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
    /// The sustained run (`--soak`, last size only).
    pub(crate) soak: Option<Soak>,
}

/// `--soak`: a sustained open-loop run with retention sweeping the history
/// at the rate the run creates, and what it left for vacuum.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Soak {
    /// Seconds it ran.
    pub(crate) seconds: f64,
    /// The open-loop creates and their acknowledgements.
    pub(crate) ack: AckPhase,
    /// Intents retention removed meanwhile.
    pub(crate) removed_intents: u64,
    /// Intents that reached CONFIRMED meanwhile.
    pub(crate) confirmed: i64,
    /// The hot tables afterwards.
    pub(crate) tables: Vec<Bloat>,
}

/// One table (or index) after the soak: `pg_stat_user_tables` and
/// `pgstattuple` / `pgstatindex`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Bloat {
    /// Table or index name.
    pub(crate) relation: String,
    /// Live rows (`n_live_tup`; tables only).
    pub(crate) live_rows: i64,
    /// Dead rows (`n_dead_tup`; tables only).
    pub(crate) dead_rows: i64,
    /// Autovacuum runs during the run (tables only).
    pub(crate) autovacuums: i64,
    /// `pgstattuple`: dead tuple and free space percent of the table's
    /// bytes; for an index, `pgstatindex`'s 100 − average leaf density and
    /// its leaf fragmentation.
    pub(crate) dead_percent: f64,
    /// Free space percent (tables) or leaf fragmentation (indexes).
    pub(crate) free_percent: f64,
    /// Bytes.
    pub(crate) bytes: i64,
}

/// Runs the history phase for every size of `--history`.
pub(crate) async fn run(
    args: &Args,
    keys: &[[TxmgrKeys; 3]],
    anvil: &Anvil,
    admin_url: &str,
) -> anyhow::Result<Vec<HistoryRun>> {
    let mut runs = Vec::new();
    let last = args.history.len().saturating_sub(1);
    for (i, (size, keys)) in args.history.iter().zip(keys).enumerate() {
        let db = BenchDb::create(admin_url, args.unsafe_async_commit).await?;
        let soak = args.soak.filter(|_| i == last);
        let run = run_one(args, *size, keys, soak, anvil, &db).await;
        if let Err(e) = db.drop_db().await {
            eprintln!("txmgr-bench: warning: {e:#}");
        }
        runs.push(run?);
    }
    Ok(runs)
}

async fn run_one(
    args: &Args,
    intents: u64,
    [plain_keys, cold_keys, retention_keys]: &[TxmgrKeys; 3],
    soak: Option<Duration>,
    anvil: &Anvil,
    db: &BenchDb,
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
    let soak = match soak {
        Some(duration) => {
            Some(sustained(args, retention_keys, &rpc, anvil, db, intents, duration).await?)
        }
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
        soak,
    })
}

/// Loads the history: the script with its tokens replaced, then VACUUM.
async fn load(db: &BenchDb, intents: u64) -> anyhow::Result<()> {
    let script = LOAD_SQL
        .replace(":SUBMITTERS", &SUBMITTERS.to_string())
        .replace(":CHAINS", &CHAINS.to_string())
        .replace(":DAYS", &DAYS.to_string())
        .replace(":N", &intents.to_string());
    let mut conn: sqlx::PgConnection = sqlx::Connection::connect(&db.url)
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

/// "many" again (other keys) while a retention loop runs as a node's would:
/// rounds of 20 batches, the next at once while behind.
async fn with_retention(
    args: &Args,
    keys: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    db: &BenchDb,
) -> anyhow::Result<RetentionRun> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&db.url)
        .await
        .context("retention pool")?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let rules = RetentionRules {
        retain: RETAIN,
        audit_retain: Duration::ZERO,
        max_batches: 20,
    };
    let retention = tokio::spawn({
        let pool = pool.clone();
        async move {
            let (mut removed, mut rounds) = (0u64, 0u64);
            while !*stopped.borrow() {
                let behind = match history_retention::round(&pool, "bench", rules).await {
                    Ok(Round::Ran {
                        removed: r,
                        pass_completed,
                        ..
                    }) => {
                        removed += r.intents;
                        rounds += 1;
                        !pass_completed
                    }
                    Ok(Round::Skipped) => false,
                    Err(e) => {
                        eprintln!("txmgr-bench: retention round: {e}");
                        false
                    }
                };
                let pause = if behind { 200 } else { 1_000 };
                tokio::select! {
                    _ = stopped.changed() => {}
                    () = tokio::time::sleep(Duration::from_millis(pause)) => {}
                }
            }
            (removed, rounds)
        }
    });
    let started = Instant::now();
    let phases = run_txmgr(args, keys, rpc, anvil, db, false, false).await;
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stop.send(true);
    let (removed_intents, rounds) = retention.await.context("retention task")?;
    pool.close().await;
    let phases = phases?;
    Ok(RetentionRun {
        many: phases.one.into_iter().chain(phases.many).collect(),
        removed_intents,
        rounds,
        removed_per_s: removed_intents as f64 / elapsed.max(1e-9),
    })
}

/// `--soak`: open-loop creates at `--soak-rate` for `duration` over the
/// retention run's submitters (their cursors live on in this database), a
/// block mined every second so intents finish, and retention sweeping the
/// history from its oldest end as fast as the run creates intents (its
/// cutoff moves through the 31 days of history at that rate: a steady state
/// in which as many intents leave as arrive).
async fn sustained(
    args: &Args,
    keys: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    db: &BenchDb,
    intents: u64,
    duration: Duration,
) -> anyhow::Result<Soak> {
    let before = bloat(db).await.unwrap_or_default();
    let confirmed_before = confirmed(db).await?;
    let mut soak_args = args.clone();
    soak_args.phases.clear();
    soak_args.ack_rate = Some(args.soak_rate);
    soak_args.ack_duration = duration;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&db.url)
        .await
        .context("retention pool")?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // History seconds per created intent: the cutoff moves this far per
    // intent the run creates.
    let history_s_per_intent = (DAYS * 24 * 3600) as f64 / intents.max(1) as f64;
    let retention = tokio::spawn({
        let (pool, mut stopped, rate) = (pool.clone(), stopped.clone(), args.soak_rate);
        async move {
            let started = Instant::now();
            let mut removed = 0u64;
            while !*stopped.borrow() {
                let swept = started.elapsed().as_secs_f64() * rate * history_s_per_intent;
                let retain = RETAIN.saturating_sub(Duration::from_secs_f64(swept));
                let rules = RetentionRules {
                    retain: retain.max(Duration::from_secs(1)),
                    audit_retain: Duration::ZERO,
                    max_batches: 20,
                };
                let behind = match history_retention::round(&pool, "bench", rules).await {
                    Ok(Round::Ran {
                        removed: r,
                        pass_completed,
                        ..
                    }) => {
                        removed += r.intents;
                        !pass_completed
                    }
                    Ok(Round::Skipped) => false,
                    Err(e) => {
                        eprintln!("txmgr-bench: retention round: {e}");
                        false
                    }
                };
                let pause = if behind { 200 } else { 1_000 };
                tokio::select! {
                    _ = stopped.changed() => {}
                    () = tokio::time::sleep(Duration::from_millis(pause)) => {}
                }
            }
            removed
        }
    });
    let miner = tokio::spawn({
        let (url, mut stopped) = (anvil.rpc_url(), stopped);
        async move {
            let client = reqwest::Client::new();
            let body =
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "evm_mine", "params": []});
            while !*stopped.borrow() {
                let _ = client.post(&url).json(&body).send().await;
                tokio::select! {
                    _ = stopped.changed() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    });
    eprintln!(
        "txmgr-bench: soak: {:.0} creates/s for {duration:?}…",
        args.soak_rate
    );
    let started = Instant::now();
    let phases = run_txmgr(&soak_args, keys, rpc, anvil, db, true, false).await;
    let seconds = started.elapsed().as_secs_f64();
    let _ = stop.send(true);
    let removed_intents = retention.await.context("retention task")?;
    miner.await.context("miner task")?;
    pool.close().await;
    let ack = phases?
        .ack
        .context("the soak's open-loop phase did not run")?;
    let after = bloat(db).await?;
    let tables = after
        .into_iter()
        .map(|mut b| {
            if let Some(old) = before.iter().find(|o| o.relation == b.relation) {
                b.autovacuums -= old.autovacuums;
            }
            b
        })
        .collect();
    Ok(Soak {
        seconds,
        ack,
        removed_intents,
        confirmed: confirmed(db).await? - confirmed_before,
        tables,
    })
}

async fn confirmed(db: &BenchDb) -> anyhow::Result<i64> {
    sqlx::query_scalar(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED' AND chain_id < 900000",
    )
    .fetch_one(&db.pool)
    .await
    .context("counting confirmed intents")
}

/// The hot tables and their indexes: dead rows, bloat, autovacuum runs.
async fn bloat(db: &BenchDb) -> anyhow::Result<Vec<Bloat>> {
    sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        .execute(&db.pool)
        .await
        .context("CREATE EXTENSION pgstattuple (superuser, package postgresql-contrib)")?;
    let tables: Vec<(String, i64, i64, i64, f64, f64, i64)> = sqlx::query_as(
        "SELECT s.relname::text, s.n_live_tup, s.n_dead_tup, s.autovacuum_count,
                t.dead_tuple_percent, t.free_percent, t.table_len
           FROM pg_stat_user_tables s, LATERAL pgstattuple(s.relid) t
          WHERE s.relname IN ('managed_tx', 'tx_attempt', 'tx_completion', 'ops_audit',
                              'submitter_nonce_cursor', 'submitter_lease')
          ORDER BY s.relname",
    )
    .fetch_all(&db.pool)
    .await
    .context("reading pgstattuple")?;
    let indexes: Vec<(String, f64, f64, i64)> = sqlx::query_as(
        "SELECT c.relname::text, 100 - i.avg_leaf_density, i.leaf_fragmentation, i.index_size
           FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
           JOIN pg_class t ON t.oid = x.indrelid
           JOIN pg_am a ON a.oid = c.relam AND a.amname = 'btree',
           LATERAL pgstatindex(c.oid) i
          WHERE t.relname IN ('managed_tx', 'tx_attempt', 'tx_completion')
          ORDER BY c.relname",
    )
    .fetch_all(&db.pool)
    .await
    .context("reading pgstatindex")?;
    Ok(tables
        .into_iter()
        .map(
            |(relation, live_rows, dead_rows, autovacuums, dead, free, bytes)| Bloat {
                relation,
                live_rows,
                dead_rows,
                autovacuums,
                dead_percent: dead,
                free_percent: free,
                bytes,
            },
        )
        .chain(
            indexes
                .into_iter()
                .map(|(relation, empty, fragmented, bytes)| Bloat {
                    relation,
                    live_rows: 0,
                    dead_rows: 0,
                    autovacuums: 0,
                    dead_percent: empty,
                    free_percent: fragmented,
                    bytes,
                }),
        )
        .collect())
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

impl HistoryRun {
    /// Prints this size next to the empty database's figures.
    pub(crate) fn print(&self, empty_phases: &[&TxmgrPhase], empty_ack: Option<&AckPhase>) {
        println!(
            "\nhistory: {} final intents loaded in {:.0} s; {:.0} bytes per intent \
             (managed_tx + tx_attempt + tx_completion + ops_audit); database {:.2} × memory; \
             shared_buffers {}{}",
            self.intents,
            self.load_s,
            self.bytes_per_intent,
            self.database_vs_memory,
            self.shared_buffers,
            if self.caches_dropped {
                "; OS page cache dropped before the phases"
            } else {
                ""
            }
        );
        if let Some((name, bytes)) = &self.largest_index {
            println!("  largest index: {name} ({} MB)", bytes / (1024 * 1024));
        }
        for t in self.tables.iter().filter(|t| t.rows > 0) {
            println!(
                "  {:<22} rows {:>11}  heap {:>6} MB  toast {:>5} MB  indexes {:>6} MB{}",
                t.table,
                t.rows,
                t.heap_bytes / (1024 * 1024),
                t.toast_bytes / (1024 * 1024),
                t.index_bytes / (1024 * 1024),
                t.largest_index
                    .as_ref()
                    .map(|(n, b)| format!("  (largest {n}: {} MB)", b / (1024 * 1024)))
                    .unwrap_or_default()
            );
        }
        let cpu = |p: &TxmgrPhase| p.cpu.bench_ms_per_tx + p.cpu.postgres_ms_per_tx;
        for phase in self.one.iter().chain(&self.many) {
            let empty = empty_phases
                .iter()
                .find(|e| e.submitters == phase.submitters)
                .copied();
            let ratio = |a: f64, b: Option<f64>| {
                b.filter(|b| *b > 0.0)
                    .map_or("-".to_owned(), |b| format!("{:.2}", a / b))
            };
            println!(
                "  {} submitters: {:.0} tx/s ({} × empty), bench+pg CPU {:.3} ms/intent ({} × empty), \
                 ack p99 {:.1} ms ({} × empty), WAL {:.0} B/intent ({} × empty)",
                phase.submitters,
                phase.e2e_tx_per_s,
                ratio(phase.e2e_tx_per_s, empty.map(|e| e.e2e_tx_per_s)),
                cpu(phase),
                ratio(cpu(phase), empty.map(cpu)),
                phase.ack_latency.p99_ms,
                ratio(phase.ack_latency.p99_ms, empty.map(|e| e.ack_latency.p99_ms)),
                phase.wal_bytes_per_intent,
                ratio(
                    phase.wal_bytes_per_intent,
                    empty.map(|e| e.wal_bytes_per_intent)
                ),
            );
        }
        if let (Some(ack), Some(empty)) = (&self.ack, empty_ack) {
            println!(
                "  open-loop creates at {:.0}/s: ack p99 {:.1} ms (empty {:.1} ms)",
                ack.rate_per_s, ack.ack_latency.p99_ms, empty.ack_latency.p99_ms
            );
        }
        for phase in &self.cold {
            let warm = self
                .one
                .iter()
                .chain(&self.many)
                .find(|p| p.submitters == phase.submitters);
            println!(
                "  page cache dropped: {} submitters {:.0} tx/s ({} × warm), bench+pg CPU {:.3} ms/intent, ack p99 {:.1} ms",
                phase.submitters,
                phase.e2e_tx_per_s,
                warm.map_or("-".to_owned(), |w| format!(
                    "{:.2}",
                    phase.e2e_tx_per_s / w.e2e_tx_per_s.max(1e-9)
                )),
                cpu(phase),
                phase.ack_latency.p99_ms,
            );
        }
        if let Some(soak) = &self.soak {
            println!(
                "  soak: {:.0} s at {:.0} creates/s (ack p99 {:.1} ms); {} confirmed, {} old intents removed by retention",
                soak.seconds,
                soak.ack.rate_per_s,
                soak.ack.ack_latency.p99_ms,
                soak.confirmed,
                soak.removed_intents
            );
            for b in &soak.tables {
                if b.live_rows > 0 || b.dead_rows > 0 || b.autovacuums > 0 {
                    println!(
                        "    {:<28} live {:>10} dead {:>8} autovacuums {:>2}  dead {:>5.1} %  free {:>5.1} %  {:>6} MB",
                        b.relation, b.live_rows, b.dead_rows, b.autovacuums, b.dead_percent,
                        b.free_percent, b.bytes / (1024 * 1024)
                    );
                } else {
                    println!(
                        "    {:<28} index: empty leaf space {:>5.1} %  leaf fragmentation {:>5.1} %  {:>6} MB",
                        b.relation, b.dead_percent, b.free_percent, b.bytes / (1024 * 1024)
                    );
                }
            }
        }
        if let Some(r) = &self.retention {
            for phase in &r.many {
                let plain = self
                    .one
                    .iter()
                    .chain(&self.many)
                    .find(|p| p.submitters == phase.submitters);
                println!(
                    "  while retention deleted ({} intents in {} rounds, {:.0}/s): {} submitters \
                     {:.0} tx/s ({} × without), bench+pg CPU {:.3} ms/intent",
                    r.removed_intents,
                    r.rounds,
                    r.removed_per_s,
                    phase.submitters,
                    phase.e2e_tx_per_s,
                    plain.map_or("-".to_owned(), |p| format!(
                        "{:.2}",
                        phase.e2e_tx_per_s / p.e2e_tx_per_s.max(1e-9)
                    )),
                    cpu(phase),
                );
            }
        }
    }
}
