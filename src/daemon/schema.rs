//! The schema at start and before an upgrade: a node refuses a database
//! that lacks a migration it needs, says so when the database is newer than
//! it (a rolling upgrade in progress), and `txmgr migrate --plan` lists the
//! pending migrations with what each does to nodes of the previous release
//! still running (`compat/migrations.toml`, README "Upgrading").

use std::fmt::Write as _;

use anyhow::Context as _;
use serde::Deserialize;
use sqlx::PgPool;
use txmgr_actors::store::{self, SchemaState, MIGRATOR};

use crate::build_info;

/// The catalogue of every migration's upgrade class, compiled in.
const CATALOGUE: &str = include_str!("../../compat/migrations.toml");

/// What a migration does to nodes of the previous release still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpgradeClass {
    /// Adds only: older nodes keep working.
    Expand,
    /// Adds only, but stalls a table's writes (or rewrites it) while it runs.
    Locks,
    /// Removes or narrows something, or allows values older nodes cannot
    /// read: apply once no node of the previous release runs.
    Contract,
}

impl UpgradeClass {
    fn advice(self) -> &'static str {
        match self {
            Self::Expand => "safe while older nodes run",
            Self::Locks => "safe while older nodes run; writes to the table wait while it runs",
            Self::Contract => "apply only once no node of the previous release runs",
        }
    }
}

/// One migration's entry in the catalogue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueEntry {
    /// The migration's version.
    pub version: i64,
    /// Its class.
    pub class: UpgradeClass,
    /// What it changes, in a line.
    pub note: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalogue {
    migration: Vec<CatalogueEntry>,
}

/// The compiled-in catalogue (`compat/migrations.toml`).
pub fn catalogue() -> Result<Vec<CatalogueEntry>, toml::de::Error> {
    Ok(toml::from_str::<Catalogue>(CATALOGUE)?.migration)
}

/// Refuses to go on when the database lacks a migration this build needs
/// (`--no-migrate` or `database.migrate_on_start = false` before anyone ran
/// `txmgr migrate`), and warns when a newer release migrated it already.
pub(crate) async fn check_at_start(pool: &PgPool) -> anyhow::Result<SchemaState> {
    let missing = store::unapplied_migrations(pool).await.context(
        "reading the database's applied migrations (an empty database: run `txmgr migrate`)",
    )?;
    if let Some(first) = missing.first() {
        anyhow::bail!(
            "the database lacks {} migration(s) this build ({}) needs, from {first}: run \
             `txmgr migrate` (`txmgr migrate --plan` lists them and what they do to running \
             nodes), or start without --no-migrate and with database.migrate_on_start = true",
            missing.len(),
            build_info::LONG_VERSION
        );
    }
    let state = store::schema_state(pool).await?;
    if !state.unknown.is_empty() {
        tracing::warn!(
            version = build_info::VERSION,
            commit = build_info::COMMIT,
            database_schema = state.database,
            build_schema = state.build,
            unknown = ?state.unknown,
            "this node is older than the database: a newer release applied migrations this build \
             does not know (a rolling upgrade in progress: upgrade this node next; \
             /v1/ops/cluster shows every node's schema)"
        );
    }
    Ok(state)
}

/// `txmgr migrate --plan`: the pending migrations (and those of a newer
/// release already applied), each with its class and what it changes, and
/// the verdict for a rolling upgrade. Changes nothing.
pub async fn plan(pool: &PgPool) -> anyhow::Result<String> {
    let applied: Vec<i64> = if store::has_migrations_table(pool).await? {
        store::applied_migrations(pool).await?
    } else {
        Vec::new()
    };
    let catalogue = catalogue().context("compat/migrations.toml")?;
    let mut out = String::new();
    let build = MIGRATOR.iter().map(|m| m.version).max().unwrap_or_default();
    let _ = writeln!(
        out,
        "txmgr {}: knows migrations up to {build}; the database is at {}",
        build_info::LONG_VERSION,
        applied
            .last()
            .map_or_else(|| "none (empty)".to_owned(), i64::to_string)
    );
    let pending: Vec<_> = MIGRATOR
        .iter()
        .filter(|m| !applied.contains(&m.version))
        .collect();
    let mut worst = None;
    if pending.is_empty() {
        let _ = writeln!(out, "no pending migration");
    } else {
        let _ = writeln!(out, "{} pending migration(s):", pending.len());
    }
    for migration in &pending {
        let entry = catalogue.iter().find(|e| e.version == migration.version);
        let class = entry.map_or(UpgradeClass::Contract, |e| e.class);
        worst = worst.max(Some(class as u8));
        let _ = writeln!(
            out,
            "  {} {:<28} {:<8} {}: {}",
            migration.version,
            migration.description,
            format!("{class:?}").to_lowercase(),
            class.advice(),
            entry.map_or("not in compat/migrations.toml", |e| e.note.as_str())
        );
    }
    let unknown: Vec<i64> = applied
        .iter()
        .copied()
        .filter(|v| !MIGRATOR.version_exists(*v))
        .collect();
    if !unknown.is_empty() {
        let _ = writeln!(
            out,
            "applied by a newer release, unknown to this build: {unknown:?} (this node is older \
             than the database: upgrade it)"
        );
    }
    let verdict = match worst {
        None => "nothing to apply",
        Some(w) if w == UpgradeClass::Contract as u8 => {
            "contract: stop or upgrade every node of the previous release before `txmgr migrate`"
        }
        Some(w) if w == UpgradeClass::Locks as u8 => {
            "expand with locks: safe while older nodes run; writes to the tables named stall while it runs"
        }
        Some(_) => "expand: safe while older nodes run",
    };
    let _ = writeln!(out, "verdict: {verdict}");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_has_one_upgrade_class() {
        let catalogue = catalogue().expect("compat/migrations.toml parses");
        for migration in MIGRATOR.iter() {
            let entries = catalogue
                .iter()
                .filter(|e| e.version == migration.version)
                .count();
            assert_eq!(
                entries, 1,
                "migration {} ({}) needs exactly one entry in compat/migrations.toml",
                migration.version, migration.description
            );
        }
        for entry in &catalogue {
            assert!(
                MIGRATOR.version_exists(entry.version),
                "compat/migrations.toml lists {}, which is no migration",
                entry.version
            );
            assert!(
                !entry.note.trim().is_empty(),
                "{} has no note",
                entry.version
            );
        }
    }
}
