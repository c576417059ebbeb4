//! The OTLP trace exporter follows the transport rules of every other
//! connection (README "Tracing"), on real `txmgr run` processes: it trusts
//! the public roots plus `telemetry.ca_file` (so a collector with a private
//! CA's certificate receives the spans), and it follows no redirect — a
//! collector answering 307 gets nothing re-sent elsewhere, and the lost spans
//! are counted. (The refusal of plaintext with headers is checked where the
//! configuration is loaded, `src/config/transport.rs`.)

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};
use std::time::Duration;

use axum::{
    http::{header, StatusCode},
    Router,
};
use serde_json::json;

use crate::common::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port,
    node::{config_toml, KEY_VAR},
    otlp::OtlpReceiver,
    tls::{TestCa, TlsProxy},
    wait_until, Anvil, TestDb,
};

/// A single node exporting traces to `telemetry`'s settings.
async fn node(db: &TestDb, anvil: &Anvil, node_id: &str, telemetry: &str) -> Daemon {
    let port = free_port();
    let config = config_toml(&db.url, &anvil.rpc_url(), node_id, "").replace(
        &format!("env = \"{KEY_VAR}\""),
        &format!("env = \"{}\"", key_var(0)),
    ) + &format!(
        "\n[http]\nlisten = \"127.0.0.1:{port}\"\n[telemetry]\nexport_timeout = \"2s\"\n{telemetry}"
    );
    let daemon = Daemon::start(node_id, port, &config).await;
    let client = reqwest::Client::new();
    daemon.ready(&client).await;
    daemon
}

/// Creates a transfer (its create and insert spans are exported at once).
async fn create(daemon: &Daemon, request_id: &str) {
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/transactions", daemon.base()))
        .json(&json!({
            "submitter": DEV_KEYS[0].1, "request_id": request_id,
            "to": "0x000000000000000000000000000000000000dEaD", "value": "1",
        }))
        .send()
        .await
        .expect("create");
    assert_eq!(answer.status(), 202);
}

/// `txmgr_trace_spans_dropped_total{reason="export_failed"}` of a node.
async fn export_failures(daemon: &Daemon) -> f64 {
    let Ok(answer) = reqwest::get(format!("{}/metrics", daemon.base())).await else {
        return 0.0;
    };
    let text = answer.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("txmgr_trace_spans_dropped_total{reason=\"export_failed\"}"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Prints the daemon's log when the test panics while it is alive.
struct LogOnPanic<'a>(&'a Daemon);

impl Drop for LogOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- log of {} ----\n{}", self.0.node_id, self.0.log());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_with_a_private_ca_certificate_receives_spans_with_ca_file() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let otlp = OtlpReceiver::start().await;
    let ca = TestCa::new("otlp-ca");
    let upstream = otlp.endpoint.trim_start_matches("http://").to_owned();
    let collector = TlsProxy::start(&ca.server("collector"), &upstream).await;
    let telemetry = format!(
        "otlp_endpoint = \"{}\"\nca_file = \"{}\"\n",
        collector.https_url(),
        ca.ca_file.display()
    );
    let daemon = node(&db, &anvil, "otlp-ca", &telemetry).await;
    let _log = LogOnPanic(&daemon);

    create(&daemon, "otlp-ca-1").await;
    wait_until(Duration::from_secs(30), || async {
        otlp.spans().iter().any(|s| s.name == "txmgr.create")
    })
    .await;
    assert_eq!(export_failures(&daemon).await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_follows_no_redirect() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let otlp = OtlpReceiver::start().await;
    // A "collector" that sends every export on to the real one with 307
    // (method and body kept): following it would deliver the spans (and
    // the exporter's headers) wherever a 3xx points.
    let hits = Arc::new(AtomicUsize::new(0));
    let target = format!("{}/v1/traces", otlp.endpoint);
    let counted = hits.clone();
    let redirector = Router::new().fallback(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let target = target.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)]) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the redirector");
    let redirector_url = format!("http://{}", listener.local_addr().expect("addr"));
    let server = tokio::spawn(async move {
        axum::serve(listener, redirector)
            .await
            .expect("redirector serves");
    });
    let telemetry = format!("otlp_endpoint = \"{redirector_url}\"\n");
    let daemon = node(&db, &anvil, "otlp-redirect", &telemetry).await;
    let _log = LogOnPanic(&daemon);

    create(&daemon, "otlp-redirect-1").await;
    // The export reached the redirector, was answered 307, and failed.
    wait_until(Duration::from_secs(30), || async {
        export_failures(&daemon).await > 0.0
    })
    .await;
    assert!(
        hits.load(Ordering::SeqCst) > 0,
        "no export reached the redirector"
    );
    assert!(
        otlp.spans().is_empty(),
        "the exporter followed the redirect: {:?}",
        otlp.spans().iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    server.abort();
}
