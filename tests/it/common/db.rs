//! A throw-away PostgreSQL database per test, so tests run in parallel
//! against real PostgreSQL without seeing each other's rows.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};

/// Admin URL used when `DATABASE_URL` is unset; matches `scripts/test.sh`.
pub(crate) const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Prefix of every test database, so leftovers of killed runs are easy to
/// spot (`select datname from pg_database where datname like 'txmgr_t_%'`).
pub(crate) const DB_PREFIX: &str = "txmgr_t_";

/// Pool size per test: enough for an engine plus assertions, small enough
/// that dozens of parallel tests stay under `max_connections`.
const POOL_SIZE: u32 = 8;

/// Bound on dropping a database, so a wedged server cannot hang the suite.
const DROP_TIMEOUT: Duration = Duration::from_secs(30);

/// A freshly created, empty database that is dropped (with `FORCE`, which
/// terminates lingering sessions) when this value goes out of scope.
pub(crate) struct TestDb {
    /// Database name, `txmgr_t_<12 hex chars>`.
    pub(crate) name: String,
    /// Connection URL of this database, for components that take a URL
    /// (e.g. daemon processes started by multi-node tests).
    pub(crate) url: String,
    /// Pool connected to this database.
    pub(crate) pool: PgPool,
    /// Admin URL the database was created from; used again to drop it.
    admin_url: String,
}

impl TestDb {
    /// Creates an empty database (no migrations) and a pool to it.
    pub(crate) async fn create() -> TestDb {
        let admin_url = admin_url();
        let simple = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{DB_PREFIX}{}", &simple[..12]);

        let mut admin = connect_admin(&admin_url).await;
        sqlx::query(&format!(r#"CREATE DATABASE "{name}""#))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("creating test database {name}: {e}"));
        admin.close().await.ok();

        let url = database_url(&admin_url, &name);
        let pool = pool_for(&url).await;
        TestDb {
            name,
            url,
            pool,
            admin_url,
        }
    }

    /// Creates an empty database and applies the engine's migrations.
    pub(crate) async fn migrated() -> TestDb {
        let db = TestDb::create().await;
        txmgr_actors::store::migrate(&db.pool)
            .await
            .unwrap_or_else(|e| panic!("migrating test database {}: {e}", db.name));
        db
    }

    /// A second, independent pool to the same database, e.g. to play a
    /// second node competing for leases.
    /// The one number `sql` answers, e.g. a `count(*)`.
    pub(crate) async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .expect(sql)
    }

    /// Waits (30 s at most) until `sql` answers `expected`; a timeout names
    /// the test line that waited.
    #[track_caller]
    pub(crate) fn wait_count<'a>(
        &'a self,
        sql: &'a str,
        expected: i64,
    ) -> impl std::future::Future<Output = ()> + 'a {
        super::wait_until(Duration::from_secs(30), move || async move {
            self.count(sql).await == expected
        })
    }

    pub(crate) async fn connect_new_pool(&self) -> PgPool {
        pool_for(&self.url).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Marks the pool closed without awaiting checked-out connections:
        // awaiting here could deadlock a current-thread test runtime, and
        // `WITH (FORCE)` below ends those sessions anyway.
        drop(self.pool.close());

        let name = self.name.clone();
        let admin_url = self.admin_url.clone();
        // Drop is synchronous and may run inside a runtime that must not be
        // blocked on itself, so drop the database from a separate OS thread
        // with its own runtime and wait for it.
        let dropper = std::thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("runtime: {e}"))?;
            runtime.block_on(async {
                let drop_db = async {
                    let mut admin = PgConnectOptions::from_str(&admin_url)?.connect().await?;
                    sqlx::query(&format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#))
                        .execute(&mut admin)
                        .await?;
                    admin.close().await
                };
                match tokio::time::timeout(DROP_TIMEOUT, drop_db).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("timed out after {DROP_TIMEOUT:?}")),
                }
            })
        });
        let outcome = dropper
            .join()
            .unwrap_or_else(|_| Err("dropper thread panicked".to_owned()));
        if let Err(e) = outcome {
            // Never panic in Drop (it may run during unwinding); a leftover
            // database is harmless and visible by its prefix.
            eprintln!("warning: could not drop test database {}: {e}", self.name);
        }
    }
}

/// The admin connection URL: `DATABASE_URL` or [`DEFAULT_DATABASE_URL`].
pub(crate) fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

async fn connect_admin(admin_url: &str) -> sqlx::PgConnection {
    let options = PgConnectOptions::from_str(admin_url)
        .unwrap_or_else(|e| panic!("invalid DATABASE_URL {admin_url}: {e}"));
    options.connect().await.unwrap_or_else(|e| {
        panic!("connecting to PostgreSQL at {admin_url} (set DATABASE_URL or run scripts/test.sh): {e}")
    })
}

async fn pool_for(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(Duration::from_secs(30))
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting pool to {url}: {e}"))
}

/// `admin_url` with its database (path) replaced by `name`; the query string
/// (sslmode etc.) is kept.
pub(crate) fn database_url(admin_url: &str, name: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (admin_url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

/// Rows of `managed_tx` the statements of the open transaction `conn` has
/// read so far (sequential reads and fetches by index): how a test tells
/// a bounded read from one that grows with the table.
pub(crate) async fn managed_tx_rows_read(conn: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT (COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0))::bigint
           FROM pg_stat_xact_user_tables WHERE relname = 'managed_tx'",
    )
    .fetch_one(conn)
    .await
    .expect("rows of managed_tx read")
}

/// Inserts `count` intents of `key` in `state` with nonces from `first`
/// (QUEUED ones get none), mined when `mined`: a successful receipt in the
/// block numbered like the nonce. For tests that need many rows of a
/// shape, not a pipeline's history.
pub(crate) async fn insert_intents(
    pool: &PgPool,
    key: txmgr_actors::SubmitterKey,
    state: &str,
    first: i64,
    count: i64,
    mined: bool,
) {
    sqlx::query(
        "INSERT INTO managed_tx (tx_id, chain_id, submitter, request_hash, intent, state, nonce,
                                 receipt, receipt_block_number, receipt_block_hash, mined_tx_hash)
         SELECT gen_random_uuid(), $1, $2, decode(repeat('00', 32), 'hex'), '{}'::jsonb, $3,
                CASE WHEN $3 <> 'QUEUED' THEN n END,
                CASE WHEN $5 THEN '{\"status\": \"0x1\"}'::jsonb END, CASE WHEN $5 THEN n END,
                CASE WHEN $5 THEN '0x' || repeat('a', 64) END,
                CASE WHEN $5 THEN '0x' || repeat('b', 64) END
           FROM generate_series($4::bigint, $4::bigint + $6 - 1) n",
    )
    .bind(key.chain_id)
    .bind(key.address_hex())
    .bind(state)
    .bind(first)
    .bind(mined)
    .bind(count)
    .execute(pool)
    .await
    .expect("insert intents");
}
