//! The API over HTTPS (`[http.tls]`) on real `txmgr run` processes: a client
//! trusting the test CA gets `/readyz`, plain `http://` on the same port and
//! a client trusting another CA fail; with `client_ca_file` (mutual TLS) a
//! client without a certificate is refused while one holding a certificate
//! of the CA is ready-checked and can create a transaction; and a key that
//! does not match the certificate stops `txmgr run` with an error naming
//! `http.tls`. Idle sockets that never start a handshake keep no client out,
//! not even one from their own address: they are closed at the handshake
//! deadline, and a full house of pending handshakes sheds the oldest first.

use std::{
    process::Stdio,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crate::common::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port,
    node::{config_toml, KEY_VAR},
    tls::{https_client, Issued, TestCa},
    wait_until, Anvil, TestDb,
};
use serde_json::json;

/// A single-node daemon configuration serving HTTPS with `issued`, with
/// client certificates from `client_ca` required when given.
fn config(
    db: &TestDb,
    anvil: &Anvil,
    node_id: &str,
    port: u16,
    issued: &Issued,
    client_ca: Option<&std::path::Path>,
) -> String {
    let client_ca = client_ca
        .map(|path| format!("client_ca_file = \"{}\"\n", path.display()))
        .unwrap_or_default();
    // The daemon harness exports dev key 0 as `key_var(0)`.
    let base = config_toml(&db.url, &anvil.rpc_url(), node_id, "").replace(
        &format!("env = \"{KEY_VAR}\""),
        &format!("env = \"{}\"", key_var(0)),
    );
    format!(
        "{base}\n[http]\nlisten = \"127.0.0.1:{port}\"\n[http.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n{client_ca}",
        issued.cert_file.display(),
        issued.key_file.display(),
    )
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
async fn https_serves_clients_of_the_ca_and_refuses_plain_http_and_other_cas() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("https-api");
    let other = TestCa::new("https-api-other");
    let port = free_port();
    let node = config(&db, &anvil, "https-1", port, &ca.server("api"), None);
    let daemon = Daemon::start("https-1", port, &node).await;
    let _log = LogOnPanic(&daemon);

    let trusted = https_client(&ca.ca_file, None);
    daemon
        .ready_at(&trusted, format!("https://localhost:{port}"))
        .await;
    let status = trusted
        .get(format!("https://localhost:{port}/readyz"))
        .send()
        .await
        .expect("readyz over https")
        .status();
    assert_eq!(status.as_u16(), 200);

    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("plain client");
    let answer = plain
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .send()
        .await;
    assert!(
        answer.is_err(),
        "plain http to the https port answered: {:?}",
        answer.map(|r| r.status())
    );

    let stranger = https_client(&other.ca_file, None);
    let answer = stranger
        .get(format!("https://localhost:{port}/readyz"))
        .send()
        .await;
    assert!(
        answer.is_err(),
        "a client trusting another CA got an answer: {:?}",
        answer.map(|r| r.status())
    );
}

/// The Rust client (`txmgr-client`) trusts a CA given as a file: it creates
/// and reads back over HTTPS; without the file the same call gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_trusts_the_ca_file_it_is_given() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("https-client");
    let port = free_port();
    let node = config(&db, &anvil, "https-client", port, &ca.server("api"), None);
    let daemon = Daemon::start("https-client", port, &node).await;
    let _log = LogOnPanic(&daemon);
    let base = format!("https://localhost:{port}");
    daemon
        .ready_at(&https_client(&ca.ca_file, None), base.clone())
        .await;

    let txmgr = txmgr_client::Client::builder(&base)
        .ca_file(&ca.ca_file)
        .build()
        .expect("client");
    let created = txmgr
        .create(txmgr_client::api::CreateBody {
            submitter: crate::common::DEV_ADDRESS_0.to_lowercase(),
            to: Some("0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()),
            value: Some("1".into()),
            ..Default::default()
        })
        .await
        .expect("create over https");
    let read = txmgr.get(created.body.tx_id).await.expect("read back");
    assert_eq!(read.tx_id, created.body.tx_id);

    let untrusting = txmgr_client::Client::builder(&base)
        .retry(txmgr_client::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        })
        .build()
        .expect("client");
    let refused = untrusting.get(created.body.tx_id).await;
    assert!(
        matches!(refused, Err(txmgr_client::Error::Transport { .. })),
        "a client without the CA got {refused:?}"
    );
    let missing = txmgr_client::Client::builder(&base)
        .ca_file("/nonexistent/ca.pem")
        .build();
    assert!(matches!(missing, Err(txmgr_client::Error::Config(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_admits_only_clients_with_a_certificate_of_the_ca() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("https-mtls");
    let port = free_port();
    let node = config(
        &db,
        &anvil,
        "https-mtls",
        port,
        &ca.server("api"),
        Some(&ca.ca_file),
    );
    let daemon = Daemon::start("https-mtls", port, &node).await;
    let _log = LogOnPanic(&daemon);

    let identity = ca.issue("client", &["client"]);
    let with_certificate = https_client(&ca.ca_file, Some(&identity));
    daemon
        .ready_at(&with_certificate, format!("https://localhost:{port}"))
        .await;

    let without = https_client(&ca.ca_file, None);
    let answer = without
        .get(format!("https://localhost:{port}/readyz"))
        .send()
        .await;
    assert!(
        answer.is_err(),
        "a client without a certificate got an answer: {:?}",
        answer.map(|r| r.status())
    );

    let response = with_certificate
        .post(format!("https://localhost:{port}/v1/transactions"))
        .json(&json!({
            "submitter": DEV_KEYS[0].1,
            "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            "value": "1",
        }))
        .send()
        .await
        .expect("create over mutual TLS");
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    assert_eq!(status, 202, "create over mutual TLS: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_does_not_match_the_certificate_stops_the_node() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("https-mismatch");
    let certificate = ca.server("api");
    let foreign = ca.server("other");
    let mismatched = Issued {
        cert_file: certificate.cert_file.clone(),
        key_file: foreign.key_file.clone(),
    };
    let port = free_port();
    let node = config(&db, &anvil, "https-bad-key", port, &mismatched, None);
    let path = ca.dir().join("node.toml");
    std::fs::write(&path, node).expect("write the node config");

    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_txmgr"));
    command
        .args(["run", "--config"])
        .arg(&path)
        .env(key_var(0), DEV_KEYS[0].0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("txmgr run with a mismatched key must exit, not serve")
        .expect("run txmgr");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!(
        "txmgr run with a mismatched key ({}):\n{stderr}",
        output.status
    );
    assert!(
        !output.status.success(),
        "txmgr run succeeded with a mismatched key; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("http.tls"),
        "the error does not name http.tls; stderr:\n{stderr}"
    );
}

/// Idle TCP connections to the daemon's port, each watched by a task that
/// records when the daemon closed it.
struct IdleSockets {
    /// Per socket, in connect order: closed by the daemon yet.
    closed: Vec<Arc<AtomicBool>>,
    /// The first `connect` began here: no socket was accepted earlier.
    opened_at: Instant,
    _watchers: Vec<tokio::task::JoinHandle<()>>,
}

impl IdleSockets {
    /// Opens `count` connections to `port` from `source` (loopback), one
    /// after the other, and never sends a byte on them.
    async fn open(source: [u8; 4], port: u16, count: usize) -> IdleSockets {
        use tokio::io::AsyncReadExt;
        let server: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let opened_at = Instant::now();
        let mut closed = Vec::new();
        let mut watchers = Vec::new();
        for _ in 0..count {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket
                .bind((source, 0).into())
                .expect("bind a loopback address");
            let mut stream = socket.connect(server).await.expect("connect");
            let flag = Arc::new(AtomicBool::new(false));
            let seen = flag.clone();
            watchers.push(tokio::spawn(async move {
                let mut byte = [0u8; 1];
                // EOF or a reset: the daemon closed it. It never sends data
                // on a connection whose handshake has not started.
                let _ = stream.read(&mut byte).await;
                seen.store(true, Ordering::SeqCst);
            }));
            closed.push(flag);
        }
        IdleSockets {
            closed,
            opened_at,
            _watchers: watchers,
        }
    }

    /// The indexes (connect order) of the sockets the daemon has closed.
    fn closed(&self) -> Vec<usize> {
        (0..self.closed.len())
            .filter(|&i| self.closed[i].load(Ordering::SeqCst))
            .collect()
    }
}

/// `GET /healthz` over HTTPS with a fresh client; how long it took.
async fn healthz(ca: &TestCa, url: String) -> Duration {
    let client = https_client(&ca.ca_file, None);
    let started = Instant::now();
    let answer = client
        .get(url)
        .send()
        .await
        .expect("/healthz over https while idle sockets are open");
    assert_eq!(answer.status().as_u16(), 200);
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_from_one_address_do_not_keep_that_address_out() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("https-nat");
    let port = free_port();
    let node = config(&db, &anvil, "https-nat", port, &ca.server("api"), None);
    let daemon = Daemon::start("https-nat", port, &node).await;
    let _log = LogOnPanic(&daemon);
    daemon
        .ready_at(
            &https_client(&ca.ca_file, None),
            format!("https://localhost:{port}"),
        )
        .await;

    // The verified scenario: 300 sockets from 127.0.0.1 that never start a
    // handshake (a slow client behind the same NAT, load balancer or
    // sidecar as everyone else), then an HTTPS request from 127.0.0.1.
    // Before: the address's 16 handshakes were taken and the request was
    // closed at once.
    let idle = IdleSockets::open([127, 0, 0, 1], port, 300).await;
    let took = healthz(&ca, format!("https://localhost:{port}/healthz")).await;
    assert!(
        took < Duration::from_secs(1),
        "/healthz took {took:?} with 300 idle sockets from the same address"
    );
    // Well within the node-wide capacity: none of them was shed...
    assert_eq!(idle.closed(), Vec::<usize>::new(), "shed below capacity");
    // ...and every one is closed once the handshake deadline (5 s) passed.
    wait_until(Duration::from_secs(15), || async {
        idle.closed().len() == 300
    })
    .await;
    let after = idle.opened_at.elapsed();
    assert!(
        after >= Duration::from_secs(5),
        "idle sockets were closed after {after:?}, before the 5 s handshake deadline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_house_of_pending_handshakes_sheds_the_oldest_first() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let ca = TestCa::new("https-shed");
    let port = free_port();
    let node = config(&db, &anvil, "https-shed", port, &ca.server("api"), None)
        + "max_pending_handshakes = 64\nhandshake_timeout = \"30s\"\n";
    let daemon = Daemon::start("https-shed", port, &node).await;
    let _log = LogOnPanic(&daemon);
    daemon
        .ready_at(
            &https_client(&ca.ca_file, None),
            format!("https://localhost:{port}"),
        )
        .await;

    // 300 idle sockets from 127.0.0.2 against 64 pending handshakes: each
    // newcomer beyond 64 closes the oldest one pending, at once (the
    // deadline is 30 s away).
    let idle = IdleSockets::open([127, 0, 0, 2], port, 300).await;
    let oldest: Vec<usize> = (0..236).collect();
    wait_until(Duration::from_secs(5), || async { idle.closed() == oldest }).await;

    // A client from another address is served at once: it sheds the oldest
    // idle socket left (no. 236), not the newest.
    let took = healthz(&ca, format!("https://127.0.0.1:{port}/healthz")).await;
    assert!(took < Duration::from_secs(1), "/healthz took {took:?}");
    let shed: Vec<usize> = (0..237).collect();
    wait_until(Duration::from_secs(5), || async { idle.closed() == shed }).await;
}
