//! The schema: the embedded migrations, applying them, and telling whether
//! a database has every one of them.

use sqlx::{migrate::Migrator, Connection, PgPool};

use super::StoreResult;

/// The embedded migrations (`migrations/` at the repository top).
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Applies every pending migration. Idempotent: applied ones are skipped, and
/// concurrent callers serialise on sqlx's advisory lock. Runs on a
/// connection of its own with the pool's statement and lock timeouts lifted:
/// a migration on a large table may rightly take longer than any request.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .options([("statement_timeout", "0"), ("lock_timeout", "0")]);
    let mut conn = sqlx::PgConnection::connect_with(&options).await?;
    let result = MIGRATOR.run_direct(&mut conn).await;
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
