//! The schema: the embedded migrations, applying them, and telling whether
//! a database has every one of them.

use sqlx::{migrate::Migrator, Connection, PgPool};

use super::StoreResult;

/// The embedded migrations (`migrations/` at the repository top).
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Applies every pending migration. Idempotent: applied ones are skipped, and
/// concurrent callers serialise on sqlx's advisory lock (one node migrates,
/// the others wait for it, then find nothing to do). Migrations of a newer
/// release already applied are left alone. Runs on a
/// connection of its own with the pool's statement and lock timeouts lifted:
/// a migration on a large table may rightly take longer than any request.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .options([("statement_timeout", "0"), ("lock_timeout", "0")]);
    let mut conn = sqlx::PgConnection::connect_with(&options).await?;
    // A newer release may have migrated the database already (a rolling
    // upgrade): its migrations are not this build's to refuse.
    let migrator = Migrator {
        migrations: MIGRATOR.migrations.clone(),
        ignore_missing: true,
        locking: true,
        no_tx: MIGRATOR.no_tx,
    };
    let result = migrator.run_direct(&mut conn).await;
    let _closed = conn.close().await;
    result
}

/// Versions of the embedded migrations the database has not applied
/// successfully (empty: the schema is what this build expects).
pub async fn unapplied_migrations(pool: &PgPool) -> StoreResult<Vec<i64>> {
    let applied: Vec<i64> =
        sqlx::query_scalar!("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(pool)
            .await?;
    Ok(MIGRATOR
        .iter()
        .filter(|m| m.migration_type.is_up_migration() || !m.migration_type.is_down_migration())
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect())
}

/// What the database's schema is against this build's migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaState {
    /// The newest migration applied (0 on an empty database).
    pub database: i64,
    /// The newest migration this build knows.
    pub build: i64,
    /// Applied migrations this build does not know: a newer release
    /// migrated the database (expand-only between adjacent releases).
    pub unknown: Vec<i64>,
}

/// The database's schema against this build's migrations (after
/// [`unapplied_migrations`] says nothing is missing).
pub async fn schema_state(pool: &PgPool) -> StoreResult<SchemaState> {
    let applied = applied_migrations(pool).await?;
    Ok(SchemaState {
        database: applied.last().copied().unwrap_or_default(),
        build: MIGRATOR.iter().map(|m| m.version).max().unwrap_or_default(),
        unknown: applied
            .into_iter()
            .filter(|v| !MIGRATOR.version_exists(*v))
            .collect(),
    })
}

/// Whether sqlx's migrations table exists (not on an empty database).
pub async fn has_migrations_table(pool: &PgPool) -> StoreResult<bool> {
    Ok(
        sqlx::query_scalar!(r#"SELECT to_regclass('_sqlx_migrations') IS NOT NULL AS "exists!""#)
            .fetch_one(pool)
            .await?,
    )
}

/// The versions applied successfully, oldest first.
pub async fn applied_migrations(pool: &PgPool) -> StoreResult<Vec<i64>> {
    Ok(
        sqlx::query_scalar!("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(pool)
            .await?,
    )
}
