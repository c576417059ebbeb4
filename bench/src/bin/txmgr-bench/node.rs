//! The system under test, in-process: a fresh database, the engine wired
//! like `txmgr run` does it (with a counting chain client), and the HTTP
//! router served on a loopback port so creates cross a real socket.

use std::{
    str::FromStr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use alloy::primitives::Address;
use anyhow::Context;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    ConnectOptions, PgPool,
};
use tokio::task::JoinHandle;
use txmgr::{
    config::Config,
    daemon::{listen_for_chains, served_chains, start_chains, stop_chains, ChainRuntime},
    http::{app, AppState, CompletionNotifier, Limits},
};
use txmgr_actors::chain::ChainClient;

use crate::chain_stats::{ChainStats, CountingChain};

/// `application_name` of the bench's own sessions on the bench database.
const BENCH_APPLICATION: &str = "txmgr-bench-poll";

/// How long a graceful engine shutdown may take at the end of the run.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// A database created for this run and dropped by [`BenchDb::drop_db`].
pub(crate) struct BenchDb {
    /// `txmgr_bench_<12 hex>`.
    pub(crate) name: String,
    /// URL of the bench database.
    pub(crate) url: String,
    /// The bench's own small pool (progress polling, diagnostics), separate
    /// from the engine's so polling never waits behind engine writes.
    pub(crate) pool: PgPool,
    /// One session on the admin database: reads `pg_stat_*` without adding
    /// transactions to the bench database, and drops it at the end.
    admin: PgPool,
    /// Transactions the bench itself ran on the bench database (progress
    /// polls), subtracted from the database's count.
    own_queries: AtomicU64,
}

impl BenchDb {
    /// Creates `txmgr_bench_<rand>` on the server of `admin_url` and applies
    /// the engine's migrations. `async_commit` (diagnostic only) turns off
    /// `synchronous_commit` for the database, so commits stop waiting for
    /// the WAL flush: it shows how much of a phase is fsync, and makes acks
    /// non-durable.
    pub(crate) async fn create(admin_url: &str, async_commit: bool) -> anyhow::Result<BenchDb> {
        let name = format!(
            "txmgr_bench_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        // DROP … WITH (FORCE) is routinely slower than sqlx's 1 s warning.
        let options = PgConnectOptions::from_str(admin_url)
            .with_context(|| format!("DATABASE_URL {admin_url}"))?
            .disable_statement_logging();
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .with_context(|| format!("connecting to PostgreSQL at {admin_url}"))?;
        sqlx::query(&format!(r#"CREATE DATABASE "{name}""#))
            .execute(&admin)
            .await
            .with_context(|| format!("creating database {name}"))?;
        if async_commit {
            sqlx::query(&format!(
                r#"ALTER DATABASE "{name}" SET synchronous_commit = off"#
            ))
            .execute(&admin)
            .await
            .context("turning synchronous_commit off")?;
        }
        let url = database_url(admin_url, &name);
        // Named, so its sessions (the bench's own polls) are not counted
        // as the engine's PostgreSQL CPU.
        let own = PgConnectOptions::from_str(&url)
            .with_context(|| format!("bench database URL {url}"))?
            .application_name(BENCH_APPLICATION);
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect_with(own)
            .await
            .with_context(|| format!("connecting to {name}"))?;
        txmgr_actors::store::migrate(&pool)
            .await
            .context("applying migrations")?;
        Ok(BenchDb {
            name,
            url,
            pool,
            admin,
            own_queries: AtomicU64::new(0),
        })
    }

    /// Committed plus rolled-back transactions of the bench database so
    /// far (`pg_stat_database`), minus the bench's own polls. PostgreSQL
    /// publishes a session's counts when it goes idle, at most once a
    /// second (an idle session's last ones within 10 s), so a reading lags
    /// the truth by about that much at both ends of an interval.
    pub(crate) async fn transactions(&self) -> anyhow::Result<i64> {
        let total: i64 = sqlx::query_scalar(
            "SELECT (xact_commit + xact_rollback)::int8 FROM pg_stat_database WHERE datname = $1",
        )
        .bind(&self.name)
        .fetch_one(&self.admin)
        .await
        .context("reading pg_stat_database")?;
        let own = i64::try_from(self.own_queries.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        Ok(total - own)
    }

    /// Process ids of the engine's sessions on the bench database (the
    /// bench's own polling sessions left out).
    pub(crate) async fn backend_pids(&self) -> Vec<i32> {
        sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
              WHERE datname = $1 AND application_name IS DISTINCT FROM $2",
        )
        .bind(&self.name)
        .bind(BENCH_APPLICATION)
        .fetch_all(&self.admin)
        .await
        .unwrap_or_default()
    }

    /// Notes one transaction the bench ran on the bench database itself.
    pub(crate) fn count_own_query(&self) {
        self.own_queries.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops the database (`WITH (FORCE)` ends the engine's sessions).
    pub(crate) async fn drop_db(self) -> anyhow::Result<()> {
        self.pool.close().await;
        sqlx::query(&format!(
            r#"DROP DATABASE IF EXISTS "{}" WITH (FORCE)"#,
            self.name
        ))
        .execute(&self.admin)
        .await
        .with_context(|| format!("dropping database {}", self.name))?;
        self.admin.close().await;
        Ok(())
    }
}

/// `admin_url` with its path replaced by `name` (query string kept).
fn database_url(admin_url: &str, name: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (admin_url, None),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority..].find('/') {
        Some(slash) => &base[..authority + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

/// The engine knobs a run sets; everything else keeps its default.
#[derive(Debug, Clone)]
pub(crate) struct NodeSettings {
    /// `[defaults] max_in_flight`: must cover every intent of the run, since
    /// nothing is mined and slots never free.
    pub(crate) max_in_flight: u64,
    /// `[defaults] batch_size`.
    pub(crate) batch_size: u32,
    /// `[defaults] ingress_capacity`: at least the client concurrency.
    pub(crate) ingress_capacity: usize,
    /// `[database] max_connections` of the engine's pool.
    pub(crate) db_connections: u32,
    /// `[chain] poll_interval`, humantime.
    pub(crate) poll_interval: String,
    /// A spend limit on every submitter that never binds (its ledger's cost).
    pub(crate) spend_limit: bool,
    /// `[chain] batch_sends`.
    pub(crate) batch_sends: bool,
}

/// The configuration of the node under test: one `env` signer per
/// submitter, each on every chain of `chains` (`(chain id, RPC URL)`); one
/// chain is written as `[chain]`, several as `[chains.c0]`, `[chains.c1]`, ….
pub(crate) fn config_toml(
    db_url: &str,
    chains: &[(u64, String)],
    settings: &NodeSettings,
    submitters: &[(Address, String)],
) -> String {
    let mut toml = format!(
        r#"
node_id = "bench"
[database]
url = "{db_url}"
max_connections = {db_connections}
[http]
request_timeout = "30s"
[defaults]
max_in_flight = {max_in_flight}
batch_size = {batch_size}
ingress_capacity = {ingress}
# Nothing is mined: keep resubmits and STUCK out of the measurement.
resubmit_interval = "1h"
stuck_after = "2h"
"#,
        db_connections = settings.db_connections,
        max_in_flight = settings.max_in_flight,
        batch_size = settings.batch_size,
        ingress = settings.ingress_capacity,
    );
    if settings.spend_limit {
        toml.push_str(
            "[defaults.policy]\nspend_limit = { value = \"1000000000000000000000000\", fees = \"1000000000000000000000000\", window = \"24h\" }\n",
        );
    }
    for (i, (chain_id, rpc_url)) in chains.iter().enumerate() {
        let table = if chains.len() == 1 {
            "[chain]".to_owned()
        } else {
            format!("[chains.c{i}]")
        };
        toml.push_str(&format!(
            "{table}\nrpc_url = \"{rpc_url}\"\nchain_id = {chain_id}\npoll_interval = \"{}\"\nbatch_sends = {}\n",
            settings.poll_interval, settings.batch_sends
        ));
    }
    for (address, var) in submitters {
        toml.push_str(&format!(
            "[submitters.\"{}\"]\nsigner = {{ kind = \"env\", env = \"{var}\" }}\n",
            format!("{address:#x}").to_lowercase()
        ));
    }
    toml
}

/// A running node: one engine per configured chain plus the HTTP server on
/// a loopback port.
pub(crate) struct Node {
    /// `http://127.0.0.1:<port>`.
    pub(crate) base_url: String,
    /// Chain calls made by the engines (every chain together).
    pub(crate) chain_stats: Arc<ChainStats>,
    chains: Vec<ChainRuntime>,
    server: JoinHandle<()>,
    work_listener: JoinHandle<()>,
}

impl Node {
    /// Starts every configured chain's engine (wired as `txmgr run` does)
    /// and serves the router; the signers' key variables must already be
    /// set.
    pub(crate) async fn start(toml: &str) -> anyhow::Result<Node> {
        let config = Config::from_toml_str(toml, std::iter::empty::<(String, String)>())
            .map_err(|e| anyhow::anyhow!("generated config invalid:\n{e}"))?;
        let pool = PgPoolOptions::new()
            .max_connections(config.database.max_connections)
            .acquire_timeout(config.database.connect_timeout)
            .connect(&config.database.url)
            .await
            .context("engine pool")?;
        let chain_stats = Arc::new(ChainStats::default());
        let counting = |_: &str, inner: Arc<dyn ChainClient>| -> Arc<dyn ChainClient> {
            Arc::new(CountingChain {
                inner,
                stats: chain_stats.clone(),
            })
        };
        let owner = txmgr_actors::LeaseOwner::for_this_process(config.node_id.as_str());
        let chains = start_chains(&config, &owner, &pool, &counting).await?;
        let engines = chains
            .iter()
            .map(|c| (c.chain_id, c.engine.clone()))
            .collect();
        let work_listener = tokio::spawn(listen_for_chains(pool.clone(), engines));
        let router = app(AppState {
            completions: CompletionNotifier::listen(pool.clone(), config.http.max_long_polls),
            pool,
            chains: served_chains(&chains),
            limits: Limits::from_config(&config.http),
            ops: Default::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the bench HTTP port")?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::warn!(error = %e, "bench HTTP server stopped");
            }
        });
        Ok(Node {
            base_url,
            chain_stats,
            chains,
            server,
            work_listener,
        })
    }

    /// Stops HTTP, drains the engines (leases released).
    pub(crate) async fn stop(self) {
        self.server.abort();
        self.work_listener.abort();
        stop_chains(&self.chains, SHUTDOWN_TIMEOUT).await;
    }
}
