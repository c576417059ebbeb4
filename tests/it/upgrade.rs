//! Upgrades (issue 51, README "Upgrading"): `txmgr migrate --plan` lists
//! what is pending and what it does to running nodes; a node refuses a
//! database that lacks its migrations; nodes migrating together apply each
//! migration once; the previous release's statements prepare against the
//! current schema (the expand/contract compat check); and nodes keep every
//! invariant across a leader kill on a database a newer release migrated;
//! and no column added since the previous release breaks its inserts.

use std::process::Stdio;

use serde_json::Value;
use sqlx::{Column, Either, Executor, TypeInfo};
use tokio::process::Command;
use txmgr::build_info;
use txmgr_actors::store::MIGRATOR;

use crate::{
    common::{
        daemon::{key_var, Daemon},
        free_port,
        leader_kill::send_across_a_leader_kill,
        node::{config_toml, KEY_VAR},
        Anvil, TestDb, DEV_ADDRESS_0,
    },
    migrations::migrate_before,
};

/// The first migration after release 0.1.0.
const FIRST_AFTER_0_1_0: i64 = 20261207000002;

/// A configuration for `db` (the chain is never contacted by `migrate`).
fn offline_config(db: &TestDb) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "txmgr-upgrade-{}.toml",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(
        &path,
        config_toml(&db.url, "http://127.0.0.1:9", "up-1", ""),
    )
    .expect("config");
    path
}

/// Runs `txmgr <args> --config <config>`: exit success and stdout + stderr.
async fn txmgr(config: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(args)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run txmgr");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn migrate_plan_lists_pending_migrations_with_their_class_and_applies_nothing() {
    let db = TestDb::create().await;
    let config = offline_config(&db);
    let (ok, plan) = txmgr(&config, &["migrate", "--plan"]).await;
    assert!(ok, "{plan}");
    assert!(plan.contains("the database is at none (empty)"), "{plan}");
    assert!(
        plan.contains(&format!("{} pending migration(s)", MIGRATOR.iter().count())),
        "{plan}"
    );
    assert!(plan.contains("verdict: contract"), "{plan}");
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&db.pool)
        .await
        .expect("read");
    assert!(!exists, "--plan applies nothing");

    // A database as release 0.1.0 left it: one expand migration pending.
    migrate_before(&db.pool, FIRST_AFTER_0_1_0).await;
    let (ok, plan) = txmgr(&config, &["migrate", "--plan"]).await;
    assert!(ok, "{plan}");
    assert!(plan.contains("1 pending migration(s)"), "{plan}");
    let line = plan
        .lines()
        .find(|l| l.trim_start().starts_with(&FIRST_AFTER_0_1_0.to_string()))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(line.contains("expand"), "{line}");
    assert!(
        plan.contains("verdict: expand: safe while older nodes run"),
        "{plan}"
    );

    let (ok, out) = txmgr(&config, &["migrate"]).await;
    assert!(ok, "{out}");
    let (ok, plan) = txmgr(&config, &["migrate", "--plan"]).await;
    assert!(ok, "{plan}");
    assert!(plan.contains("no pending migration"), "{plan}");
    assert!(plan.contains("verdict: nothing to apply"), "{plan}");
    let (ok, version) = txmgr(&config, &["--version"]).await;
    assert!(ok, "{version}");
    assert!(
        version.contains(build_info::LONG_VERSION) && !build_info::COMMIT.is_empty(),
        "{version}"
    );
}

#[tokio::test]
async fn a_node_refuses_a_database_that_lacks_its_migrations() {
    let db = TestDb::create().await;
    let config = offline_config(&db);
    let (ok, out) = txmgr(&config, &["run", "--no-migrate"]).await;
    assert!(!ok, "an empty database is refused: {out}");
    assert!(out.contains("txmgr migrate"), "{out}");

    migrate_before(&db.pool, FIRST_AFTER_0_1_0).await;
    let (ok, out) = txmgr(&config, &["run", "--no-migrate"]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "lacks 1 migration(s) this build ({}) needs, from {FIRST_AFTER_0_1_0}",
            build_info::LONG_VERSION
        )),
        "{out}"
    );
}

#[tokio::test]
async fn nodes_migrating_together_apply_each_migration_once() {
    let db = TestDb::create().await;
    let config = offline_config(&db);
    let runs: Vec<_> = (0..3).map(|_| txmgr(&config, &["migrate"])).collect();
    for (ok, out) in futures::future::join_all(runs).await {
        assert!(ok, "{out}");
    }
    let (applied, failed): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE NOT success) FROM _sqlx_migrations",
    )
    .fetch_one(&db.pool)
    .await
    .expect("read");
    assert_eq!(applied, MIGRATOR.iter().count() as i64);
    assert_eq!(failed, 0);
}

/// The compat check of README "Upgrading": every checked statement of the
/// previous release (`compat/<version>/queries.json`, kept by
/// `scripts/compat-snapshot.sh`) prepares against the fully migrated schema
/// with the columns, types and nullability that release's build decodes.
#[tokio::test]
async fn the_previous_releases_statements_prepare_against_the_current_schema() {
    let (release, snapshot) = previous_release();
    let db = TestDb::migrated().await;
    let statements = snapshot["statements"].as_array().expect("statements");
    let mut broken = Vec::new();
    for statement in statements {
        let query = statement["query"].as_str().expect("query");
        let described = match (&db.pool).describe(query).await {
            Ok(described) => described,
            Err(e) => {
                broken.push(format!("{e}\n  in: {query}"));
                continue;
            }
        };
        let columns: Vec<(String, String)> = described
            .columns()
            .iter()
            .map(|c| (c.name().to_owned(), type_name(c.type_info())))
            .collect();
        let expected: Vec<(String, String)> = statement["columns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| (c[0].as_str().unwrap_or("").to_owned(), json_type(&c[1])))
            .collect();
        if columns != expected {
            broken.push(format!(
                "columns {expected:?} became {columns:?}\n  in: {query}"
            ));
        }
        if let (Some(Either::Left(now)), Some(then)) = (
            described.parameters(),
            statement["parameters"]["Left"].as_array(),
        ) {
            let now: Vec<String> = now.iter().map(type_name).collect();
            let then: Vec<String> = then.iter().map(json_type).collect();
            if now != then {
                broken.push(format!("parameters {then:?} became {now:?}\n  in: {query}"));
            }
        }
        for (i, was) in statement["nullable"]
            .as_array()
            .expect("nullable")
            .iter()
            .enumerate()
        {
            // A column that release decodes as never NULL must not become
            // nullable (its `Option`-less decode would fail on the first NULL).
            if was.as_bool() == Some(false) && described.nullable(i) == Some(true) {
                broken.push(format!("column {i} became nullable\n  in: {query}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} of {} statements of release {release} break against the migrated schema:\n{}",
        broken.len(),
        statements.len(),
        broken.join("\n")
    );
    println!(
        "compat: {} statements of release {release} prepare against the schema at {}",
        statements.len(),
        build_info::schema_version()
    );
}

/// What the statement check cannot see: an `INSERT` of the previous
/// release that leaves out a column added since prepares fine and fails
/// when it runs if that column is NOT NULL without a default. Every column
/// added after release 0.1.0 to a table it had must be nullable, defaulted
/// or generated.
#[tokio::test]
async fn columns_added_since_the_previous_release_never_break_its_inserts() {
    let columns = |pool: sqlx::PgPool| async move {
        let rows: Vec<(String, String, bool)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text,
                    is_nullable = 'NO' AND column_default IS NULL AND is_generated = 'NEVER'
                      AND is_identity = 'NO'
               FROM information_schema.columns WHERE table_schema = 'public'",
        )
        .fetch_all(&pool)
        .await
        .expect("columns");
        rows
    };
    let db = TestDb::create().await;
    migrate_before(&db.pool, FIRST_AFTER_0_1_0).await;
    let then = columns(db.pool.clone()).await;
    txmgr_actors::store::migrate(&db.pool)
        .await
        .expect("migrate");
    let now = columns(db.pool.clone()).await;
    let tables_then: std::collections::BTreeSet<&str> =
        then.iter().map(|(t, _, _)| t.as_str()).collect();
    let breaking: Vec<String> = now
        .iter()
        .filter(|(table, column, required)| {
            *required
                && tables_then.contains(table.as_str())
                && !then.iter().any(|(t, c, _)| t == table && c == column)
        })
        .map(|(table, column, _)| format!("{table}.{column}"))
        .collect();
    assert!(
        breaking.is_empty(),
        "NOT NULL columns without a default added to tables release 0.1.0 writes \
         (its INSERTs would fail): {breaking:?}"
    );
}

/// The newest release kept under `compat/` older than this build.
fn previous_release() -> (String, Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("compat");
    let parse = |v: &str| -> Vec<u64> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
    let current = parse(build_info::VERSION);
    let release = std::fs::read_dir(&dir)
        .expect("compat/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| dir.join(name).join("queries.json").is_file())
        .filter(|name| parse(name) < current)
        .max_by_key(|name| parse(name))
        .expect("compat/ keeps the previous release's statements");
    let text = std::fs::read_to_string(dir.join(&release).join("queries.json")).expect("read");
    (release, serde_json::from_str(&text).expect("queries.json"))
}

/// A PostgreSQL type's SQL name (`INT8`, `TEXT[]`).
fn type_name(type_info: &sqlx::postgres::PgTypeInfo) -> String {
    type_info.name().to_uppercase()
}

/// The same from sqlx's offline data, which names the type's variant
/// (`Int8`, `TextArray`) or, for a custom type, gives its name.
fn json_type(value: &Value) -> String {
    match value {
        Value::String(variant) => match variant.strip_suffix("Array") {
            Some(element) => format!("{}[]", element.to_uppercase()),
            None => variant.to_uppercase(),
        },
        other => other["Custom"]["name"]
            .as_str()
            .map_or_else(|| other.to_string(), str::to_uppercase),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_run_on_a_database_a_newer_release_migrated_and_keep_their_invariants() {
    let db = TestDb::migrated().await;
    // What release N+1 would do: an additive migration this build does not know.
    let future: i64 = 29991231000001;
    sqlx::raw_sql(
        "ALTER TABLE managed_tx ADD COLUMN next_release_note TEXT;
         CREATE TABLE next_release_table (id BIGINT PRIMARY KEY);",
    )
    .execute(&db.pool)
    .await
    .expect("the newer release's schema");
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'next release', true, '\\x00', 1)",
    )
    .bind(future)
    .execute(&db.pool)
    .await
    .expect("the newer release's migration row");

    let anvil = Anvil::start().await;
    let http = reqwest::Client::new();
    let mut nodes = Vec::new();
    for node_id in ["up-1", "up-2"] {
        let port = free_port();
        // migrate_on_start stays on: the newer migration is not refused.
        let toml = config_toml(
            &db.url,
            &anvil.rpc_url(),
            node_id,
            "finality = { confirmations = 1 }",
        )
        .replace(
            &format!("env = \"{KEY_VAR}\""),
            &format!("env = \"{}\"", key_var(0)),
        ) + &format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n");
        let daemon = Daemon::start(node_id, port, &toml).await;
        daemon.ready(&http).await;
        assert!(
            daemon
                .log()
                .contains("this node is older than the database"),
            "{}",
            daemon.log()
        );
        nodes.push(daemon);
    }
    let health: Value = nodes[0].get_json(&http, "/healthz").await;
    assert_eq!(health["version"], build_info::VERSION);
    assert_eq!(health["commit"], build_info::COMMIT);
    let metrics = nodes[0].get_text(&http, "/metrics").await;
    assert!(
        metrics.lines().any(|l| l.starts_with("txmgr_build_info{")
            && l.contains(&format!("version=\"{}\"", build_info::VERSION))
            && l.contains(&format!("commit=\"{}\"", build_info::COMMIT))
            && l.ends_with(" 1")),
        "{metrics}"
    );
    let cluster: Value = nodes[0].get_json(&http, "/v1/ops/cluster").await;
    assert_eq!(cluster["database_schema"], future, "{cluster}");
    assert_eq!(
        cluster["builds"],
        serde_json::json!([format!(
            "{} (commit {})",
            build_info::VERSION,
            build_info::COMMIT
        )]),
        "{cluster}"
    );
    for node in cluster["nodes"].as_array().expect("nodes") {
        assert_eq!(node["older_than_database"], true, "{node}");
        assert_eq!(
            node["schema_version"],
            build_info::schema_version(),
            "{node}"
        );
    }

    // A leader kill mid-stream: each intent once, no nonce gap.
    send_across_a_leader_kill(
        &anvil,
        &mut nodes,
        &DEV_ADDRESS_0.to_lowercase(),
        "upgrade",
        10,
        10,
    )
    .await;
}
