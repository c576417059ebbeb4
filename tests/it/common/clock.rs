//! A database clock the test can move.
//!
//! The engine writes `now()` unqualified in every expiry decision. A pool
//! from [`ClockedDb::pool`] sets `search_path = fake_clock, pg_catalog,
//! public`; naming `pg_catalog` explicitly after `fake_clock` lets
//! `fake_clock.now()` — the real clock plus an offset kept in a table —
//! shadow the built-in. Moving that offset moves the *database* clock and
//! nothing else, so a test can expire leases without waiting, and proves
//! the engine never consults the node's own clock.

use std::{str::FromStr, time::Duration};

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool,
};

/// Installs the fake clock in a database and hands out pools that use it.
pub(crate) struct ClockedDb {
    url: String,
    admin: PgPool,
}

impl ClockedDb {
    /// Installs `fake_clock.now()` (offset zero) in the database at `url`.
    pub(crate) async fn install(url: &str, admin: &PgPool) -> ClockedDb {
        for statement in [
            "CREATE SCHEMA IF NOT EXISTS fake_clock",
            "CREATE TABLE IF NOT EXISTS fake_clock.shift (one BOOLEAN PRIMARY KEY DEFAULT true,
                 by INTERVAL NOT NULL)",
            "INSERT INTO fake_clock.shift (by) VALUES (interval '0') ON CONFLICT DO NOTHING",
            "CREATE OR REPLACE FUNCTION fake_clock.now() RETURNS timestamptz LANGUAGE sql STABLE
                 AS $$ SELECT pg_catalog.now() + (SELECT by FROM fake_clock.shift) $$",
        ] {
            sqlx::query(statement)
                .execute(admin)
                .await
                .unwrap_or_else(|e| panic!("installing fake clock ({statement}): {e}"));
        }
        ClockedDb {
            url: url.to_owned(),
            admin: admin.clone(),
        }
    }

    /// A new pool (one "node") whose `now()` is the fake clock.
    pub(crate) async fn pool(&self) -> PgPool {
        let options = PgConnectOptions::from_str(&self.url)
            .expect("test database url parses")
            .options([("search_path", "fake_clock,pg_catalog,public")]);
        PgPoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .expect("connecting a fake-clock pool")
    }

    /// Moves the database clock forward by `by` (cumulative).
    pub(crate) async fn advance(&self, by: Duration) {
        sqlx::query("UPDATE fake_clock.shift SET by = by + $1 * interval '1 millisecond'")
            .bind(i64::try_from(by.as_millis()).expect("small test duration"))
            .execute(&self.admin)
            .await
            .expect("advancing the fake clock");
    }
}
