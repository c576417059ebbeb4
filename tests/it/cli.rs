//! The `txmgr` binary: `config check`, `migrate`, and `run` start-up/shutdown.

use std::{path::PathBuf, process::Stdio, time::Duration};

use crate::common::{wait_until, Anvil, TestDb};

fn txmgr() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_txmgr"));
    command
        .env_remove("RUST_LOG")
        .env("TXMGR_DEV_PRIVATE_KEY", crate::common::DEV_PRIVATE_KEY_0);
    command
}

fn shipped_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml")
}

#[test]
fn config_check_prints_the_effective_config_without_secrets() {
    let output = txmgr()
        .args(["config", "check", "--config"])
        .arg(shipped_config())
        .env(
            "TXMGR_DATABASE__URL",
            "postgres://app:hunter2@db.internal:5432/txmgr?sslmode=verify-full&password=hunter3",
        )
        .output()
        .expect("run txmgr");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("[lease]"), "{stdout}");
    assert!(stdout.contains("db.internal"), "{stdout}");
    assert!(!stdout.contains("hunter2"), "password leaked: {stdout}");
    assert!(
        !stdout.contains("hunter3"),
        "query password leaked: {stdout}"
    );
    assert!(!stdout.contains(crate::common::DEV_PRIVATE_KEY_0.trim_start_matches("0x")));
}

#[test]
fn config_check_names_the_bad_key_and_fails() {
    let output = txmgr()
        .args(["config", "check", "--config"])
        .arg(shipped_config())
        .env("TXMGR_LEASE__RENEW_INTERVAL", "9s")
        .output()
        .expect("run txmgr");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("lease.renew_interval"), "{stderr}");
}

#[test]
fn config_check_refuses_plaintext_that_carries_a_secret_naming_the_key() {
    let remote = std::fs::read_to_string(shipped_config()).expect("shipped config")
        + "\n[submitters.\"0x70997970c51812dc3a010c7d01b50e0d17dc79c8\"]\n\
           signer = { kind = \"remote\", url = \"http://user:pw-marker@signer.internal:9000\" }\n";
    let path = std::env::temp_dir().join(format!("txmgr-plain-{}.toml", uuid::Uuid::new_v4()));
    std::fs::write(&path, remote).expect("config file");
    /// The key named, an environment override, the file.
    type Case<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a PathBuf);
    let shipped = shipped_config();
    let cases: [Case<'_>; 4] = [
        (
            "database.url",
            Some((
                "TXMGR_DATABASE__URL",
                "postgres://app:pw-marker@db.internal/txmgr",
            )),
            &shipped_config(),
        ),
        (
            "chain.rpc_url",
            Some(("TXMGR_CHAIN__RPC_URL", "http://eth.example/v2/pw-marker")),
            &shipped,
        ),
        (
            "chain.rpc_url",
            Some(("TXMGR_CHAIN__RPC_URL", "http://eth.example/?key=pw-marker")),
            &shipped,
        ),
        (
            "submitters.0x70997970c51812dc3a010c7d01b50e0d17dc79c8.signer.url",
            None,
            &path,
        ),
    ];
    for (key, env, file) in cases {
        let mut command = txmgr();
        command.args(["config", "check", "--config"]).arg(file);
        if let Some((var, value)) = env {
            command.env(var, value);
        }
        let output = command.output().expect("run txmgr");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{key}: {stderr}");
        assert!(
            stderr.contains(key) && stderr.contains("allow_insecure"),
            "{key}: {stderr}"
        );
        assert!(
            !stderr.contains("pw-marker"),
            "{key}: secret shown: {stderr}"
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// The shipped configuration with `chain.sweep_interval` under its old
/// name, in a file of its own (removed on drop).
struct OldNameConfig(PathBuf);

impl OldNameConfig {
    fn write() -> Self {
        let text = std::fs::read_to_string(shipped_config()).expect("read config.toml");
        assert!(text.contains("\nsweep_interval = "), "shipped key moved");
        let path =
            std::env::temp_dir().join(format!("txmgr-old-name-{}.toml", uuid::Uuid::new_v4()));
        std::fs::write(
            &path,
            text.replace("\nsweep_interval = ", "\nstale_receipt_timeout = "),
        )
        .expect("write config");
        Self(path)
    }
}

impl Drop for OldNameConfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn config_check_warns_about_a_renamed_key_and_shows_the_new_name() {
    let file = OldNameConfig::write();
    let output = txmgr()
        .args(["config", "check", "--config"])
        .arg(&file.0)
        .output()
        .expect("run txmgr");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    assert!(
        stderr.contains("warning: chain.stale_receipt_timeout: deprecated")
            && stderr.contains("chain.sweep_interval"),
        "{stderr}"
    );
    assert!(stdout.contains("\nsweep_interval = \"1m\""), "{stdout}");
    assert!(!stdout.contains("stale_receipt_timeout"), "{stdout}");
}

#[tokio::test]
async fn a_renamed_key_is_logged_as_a_warning_at_start() {
    let db = TestDb::create().await;
    let file = OldNameConfig::write();
    let output = txmgr()
        .args(["migrate", "--config"])
        .arg(&file.0)
        .env("TXMGR_DATABASE__URL", &db.url)
        .output()
        .expect("run txmgr");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("chain.stale_receipt_timeout"))
        .unwrap_or_else(|| panic!("no warning logged: {stderr}"));
    assert!(
        line.contains("WARN") && line.contains("chain.sweep_interval"),
        "{line}"
    );
}

#[tokio::test]
async fn migrate_applies_the_schema() {
    let db = TestDb::create().await;
    let status = txmgr()
        .args(["migrate", "--config"])
        .arg(shipped_config())
        .env("TXMGR_DATABASE__URL", &db.url)
        .status()
        .expect("run txmgr");
    assert!(status.success());
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'managed_tx'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("query");
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn run_registers_the_node_and_deregisters_on_sigterm() {
    let db = TestDb::create().await;
    let anvil = Anvil::start().await;
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["run", "--config"])
        .arg(shipped_config())
        .env("TXMGR_DATABASE__URL", &db.url)
        .env("TXMGR_CHAIN__RPC_URL", anvil.rpc_url())
        .env("TXMGR_NODE_ID", "cli-test-node")
        .env("TXMGR_HTTP__LISTEN", "127.0.0.1:0")
        .env("TXMGR_DEV_PRIVATE_KEY", crate::common::DEV_PRIVATE_KEY_0)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn daemon");

    let node_rows = || {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM txmgr_node WHERE node_id = 'cli-test-node'",
            )
            .fetch_one(&pool)
            .await
            .unwrap_or(0)
        }
    };
    wait_until(Duration::from_secs(30), || async { node_rows().await == 1 }).await;

    let exit = crate::common::daemon::terminate(&mut daemon).await;
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        node_rows().await,
        0,
        "graceful shutdown removes the node row"
    );
}

#[tokio::test]
async fn run_refuses_a_chain_id_mismatch() {
    let db = TestDb::create().await;
    let anvil = Anvil::start().await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"))
        .args(["run", "--config"])
        .arg(shipped_config())
        .env("TXMGR_DATABASE__URL", &db.url)
        .env("TXMGR_CHAIN__RPC_URL", anvil.rpc_url())
        .env("TXMGR_CHAIN__CHAIN_ID", "1")
        .env("TXMGR_DEV_PRIVATE_KEY", crate::common::DEV_PRIVATE_KEY_0)
        .output()
        .await
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("chain.chain_id"), "{stderr}");
}

#[test]
fn config_check_shows_a_kms_signer_by_kind_and_key_id_never_credentials() {
    let text = std::fs::read_to_string(shipped_config()).expect("shipped config")
        + "\n[submitters.\"0x70997970c51812dc3a010c7d01b50e0d17dc79c8\"]\n\
           signer = { kind = \"aws_kms\", key_id = \"alias/txmgr-hot\", region = \"eu-west-1\", \
           endpoint_url = \"https://kms.eu-west-1.example:443/path?token=secret-in-url\" }\n";
    let path = std::env::temp_dir().join(format!("txmgr-kms-{}.toml", uuid::Uuid::new_v4()));
    std::fs::write(&path, text).expect("config file");
    let output = txmgr()
        .args(["config", "check", "--config"])
        .arg(&path)
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-marker")
        .env("AWS_ACCESS_KEY_ID", "AKIAMARKER")
        .output()
        .expect("run txmgr");
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("kind = \"aws_kms\""), "{stdout}");
    assert!(
        stdout.contains("alias/txmgr-hot") && stdout.contains("eu-west-1"),
        "{stdout}"
    );
    for secret in ["aws-secret-marker", "AKIAMARKER", "secret-in-url"] {
        assert!(!stdout.contains(secret), "{secret} shown:\n{stdout}");
    }
}
