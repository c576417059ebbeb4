//! The daemon's database connection over TLS, against a private PostgreSQL
//! cluster that presents a certificate of a throw-away test CA:
//! `sslmode=verify-full` with that CA as `sslrootcert` connects over TLS,
//! `sslmode=require` encrypts without a root certificate, a root certificate
//! of another CA fails with an error naming the certificate problem (and no
//! password), and `sslmode=disable` stays plain text.

use crate::common::{node::config_toml, pg_cluster::PrivatePg, tls::TestCa};
use txmgr::config::Config;

/// Trust auth accepts any password, so the URLs carry a marker one that
/// must never show up in an error.
const PASSWORD: &str = "pg-tls-marker-pw";

/// A daemon configuration whose database is `url` (the chain is never
/// contacted by these tests).
fn config_for(url: &str) -> Config {
    let toml = config_toml(url, "http://127.0.0.1:9", "pg-tls-node", "");
    Config::from_toml_str(&toml, std::iter::empty::<(String, String)>())
        .unwrap_or_else(|e| panic!("test config invalid:\n{e}"))
}

/// `admin_url(params)` with the marker password in it.
fn url_with_password(pg: &PrivatePg, params: &str) -> String {
    let url = pg
        .admin_url(params)
        .replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    assert!(url.contains(PASSWORD), "unexpected admin url shape: {url}");
    url
}

/// Whether the pool's own session is encrypted, per the server.
async fn session_ssl(pool: &sqlx::PgPool) -> bool {
    sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(pool)
        .await
        .expect("pg_stat_ssl row of this session")
}

#[tokio::test]
async fn verify_full_with_the_test_ca_connects_over_tls() {
    let ca = TestCa::new("pg-tls");
    let pg = PrivatePg::start_tls(&ca.server("pg-server"));

    let verify_full = url_with_password(
        &pg,
        &format!("sslmode=verify-full&sslrootcert={}", ca.ca_file.display()),
    );
    let pool = txmgr::daemon::connect(&config_for(&verify_full))
        .await
        .unwrap_or_else(|e| panic!("verify-full with the test CA must connect: {e:#}"));
    assert!(
        session_ssl(&pool).await,
        "sslmode=verify-full session is not encrypted"
    );
    pool.close().await;

    let require = pg.admin_url("sslmode=require");
    let pool = txmgr::daemon::connect(&config_for(&require))
        .await
        .unwrap_or_else(|e| panic!("sslmode=require without a root certificate: {e:#}"));
    assert!(
        session_ssl(&pool).await,
        "sslmode=require session is not encrypted"
    );
    pool.close().await;
}

#[tokio::test]
async fn a_wrong_root_certificate_fails_clearly() {
    let ca = TestCa::new("pg-tls-right");
    let other = TestCa::new("pg-tls-other");
    let pg = PrivatePg::start_tls(&ca.server("pg-server"));

    let url = url_with_password(
        &pg,
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            other.ca_file.display()
        ),
    );
    let error = match txmgr::daemon::connect(&config_for(&url)).await {
        Ok(pool) => {
            let ssl = session_ssl(&pool).await;
            panic!("connected (ssl = {ssl}) although the root certificate is of another CA")
        }
        Err(error) => format!("{error:#}"),
    };
    eprintln!("connect with a foreign root certificate: {error}");
    let lower = error.to_lowercase();
    assert!(
        lower.contains("certificate") || lower.contains("unknownissuer"),
        "the error does not name the certificate problem: {error}"
    );
    assert!(
        !error.contains(PASSWORD),
        "the error shows the database password: {error}"
    );
}

#[tokio::test]
async fn sslmode_disable_against_an_ssl_server_is_plain() {
    let ca = TestCa::new("pg-tls-plain");
    let pg = PrivatePg::start_tls(&ca.server("pg-server"));

    let pool = txmgr::daemon::connect(&config_for(&pg.admin_url("sslmode=disable")))
        .await
        .unwrap_or_else(|e| panic!("sslmode=disable must connect in plain text: {e:#}"));
    assert!(
        !session_ssl(&pool).await,
        "sslmode=disable session is encrypted"
    );
    pool.close().await;
}
