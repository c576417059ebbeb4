//! `--soak` of phase "history": a sustained open-loop run on the loaded
//! database with blocks mined and retention sweeping the history at the
//! rate the run creates, then what it left for vacuum (README "Benchmark").

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::{
    anvil::Anvil,
    history::{DAYS, RETAIN},
    history_retention::RetentionLoop,
    keys::TxmgrKeys,
    node::BenchDb,
    report::AckPhase,
    session::{run_txmgr, RpcTarget},
    Args,
};

/// Age of the loaded history's newest intent (bench/sql/history.sql).
const HISTORY_NEWEST_AGE: Duration = Duration::from_secs(3600);

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
    /// Whether the server ran autovacuum (`SHOW autovacuum`): off, the
    /// dead rows are what the run left without it.
    pub(crate) autovacuum: bool,
}

/// One table (or index) after the soak: `pg_stat_user_tables` and
/// `pgstattuple_approx` / `pgstatindex`.
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
    /// `pgstattuple_approx`: dead tuple and free space percent of the table's
    /// bytes; for an index, `pgstatindex`'s 100 − average leaf density and
    /// its leaf fragmentation.
    pub(crate) dead_percent: f64,
    /// Free space percent (tables) or leaf fragmentation (indexes).
    pub(crate) free_percent: f64,
    /// Bytes.
    pub(crate) bytes: i64,
}

/// `--soak`: open-loop creates at `--soak-rate` for `duration` over
/// submitters of its own (an earlier phase's submitters have intents whose
/// transactions left the pool unmined: the soak's would queue behind those
/// nonces and never be mined), a block mined every second so intents
/// finish, and retention sweeping the history from its oldest end as fast
/// as the run creates intents (its cutoff moves through the 31 days of
/// history at that rate: a steady state in which as many intents leave as
/// arrive).
pub(crate) async fn sustained(
    args: &Args,
    keys: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    db: &BenchDb,
    intents: u64,
    duration: Duration,
) -> anyhow::Result<Soak> {
    let vacuums_before = autovacuums(db).await?;
    let confirmed_before = confirmed(db).await?;
    let mut soak_args = args.clone();
    soak_args.phases.clear();
    soak_args.ack_rate = Some(args.soak_rate);
    soak_args.ack_duration = duration;
    // The bound on reaching TRACKING counts from the first create: the
    // whole run, then the usual bound.
    soak_args.tracking_timeout = duration + args.tracking_timeout;
    // History seconds per created intent: the cutoff moves this far per
    // intent the run creates.
    let history_s_per_intent = (DAYS * 24 * 3600) as f64 / intents.max(1) as f64;
    let rate = args.soak_rate;
    // Never closer to now than the history's newest intent (an hour old): a
    // small history would otherwise be swept within seconds and the cutoff
    // would go on into the run's own intents.
    let retention = RetentionLoop::start(db, move |elapsed| {
        RETAIN
            .saturating_sub(Duration::from_secs_f64(
                elapsed * rate * history_s_per_intent,
            ))
            .max(HISTORY_NEWEST_AGE)
    })
    .await?;
    let miner = tokio::spawn({
        let (url, mut stopped) = (anvil.rpc_url(), retention.stopped());
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
    let removed_intents = retention.stop().await?.intents;
    miner.await.context("miner task")?;
    let ack = phases?
        .ack
        .context("the soak's open-loop phase did not run")?;
    let after = bloat(db).await?;
    let tables = after
        .into_iter()
        .map(|mut b| {
            if let Some((_, old)) = vacuums_before.iter().find(|(r, _)| *r == b.relation) {
                b.autovacuums -= old;
            }
            b
        })
        .collect();
    let autovacuum: String = sqlx::query_scalar("SHOW autovacuum")
        .fetch_one(&db.pool)
        .await
        .context("SHOW autovacuum")?;
    Ok(Soak {
        autovacuum: autovacuum == "on",
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

/// Autovacuum runs so far per hot table (cheap: no scan).
async fn autovacuums(db: &BenchDb) -> anyhow::Result<Vec<(String, i64)>> {
    sqlx::query_as(
        "SELECT relname::text, autovacuum_count FROM pg_stat_user_tables
          WHERE relname IN ('managed_tx', 'tx_attempt', 'tx_completion', 'ops_audit',
                            'submitter_nonce_cursor', 'submitter_lease')",
    )
    .fetch_all(&db.pool)
    .await
    .context("reading autovacuum counts")
}

/// The hot tables and their indexes: dead rows, bloat, autovacuum runs.
/// Tables through `pgstattuple_approx`, which reads only the pages the
/// visibility map does not mark all-visible (exact for those; a loaded
/// history of 10 million intents is 25 GB the exact scan would read).
async fn bloat(db: &BenchDb) -> anyhow::Result<Vec<Bloat>> {
    sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        .execute(&db.pool)
        .await
        .context("CREATE EXTENSION pgstattuple (superuser, package postgresql-contrib)")?;
    let tables: Vec<(String, i64, i64, i64, f64, f64, i64)> = sqlx::query_as(
        "SELECT s.relname::text, s.n_live_tup, s.n_dead_tup, s.autovacuum_count,
                t.dead_tuple_percent, t.approx_free_percent, t.table_len
           FROM pg_stat_user_tables s, LATERAL pgstattuple_approx(s.relid) t
          WHERE s.relname IN ('managed_tx', 'tx_attempt', 'tx_completion', 'ops_audit',
                              'submitter_nonce_cursor', 'submitter_lease')
          ORDER BY s.relname",
    )
    .fetch_all(&db.pool)
    .await
    .context("reading pgstattuple_approx")?;
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
