//! A private LocalStack (KMS only, no containers) on a free loopback port,
//! SIGKILLed when dropped: the emulator behind the `aws_kms` signer tests and
//! the signer benchmark. Installed by `scripts/install-localstack.sh` into
//! the workspace's `.tools/localstack` (a venv); `LOCALSTACK_PYTHON` points
//! elsewhere.
//!
//! [`LocalStack::pause`] / [`LocalStack::resume`] freeze the process
//! (SIGSTOP / SIGCONT): KMS stops answering — connections hang and time
//! out — without losing its keys, which live in the process's memory.

use std::{path::PathBuf, process::Stdio, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    process::{Child, Command},
    time::Instant,
};

use crate::{port::try_free_port, KitError};

/// How long LocalStack may take to report KMS available.
const STARTUP_DEADLINE: Duration = Duration::from_secs(90);

/// A running LocalStack serving KMS.
#[derive(Debug)]
pub struct LocalStack {
    child: Child,
    port: u16,
    /// Its state and output; removed when it is dropped (kept when it did
    /// not start, for the output the error points at).
    data: PathBuf,
}

/// The Python of the LocalStack venv.
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("LOCALSTACK_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(python);
    }
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../.tools/localstack/bin/python"
    ))
}

impl LocalStack {
    /// Starts LocalStack and waits until KMS is available; panics with the
    /// reason otherwise (tests).
    pub async fn start() -> LocalStack {
        Self::try_start().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts LocalStack and waits until KMS is available.
    pub async fn try_start() -> Result<LocalStack, KitError> {
        let bin = python();
        let port = try_free_port()?;
        let data = std::env::temp_dir().join(format!("txmgr-localstack-{port}"));
        // A folder an earlier instance on the same port left (SIGKILLed)
        // may hold its state: every instance starts from an empty one.
        let _ = std::fs::remove_dir_all(&data);
        let log_path = data.join("localstack.log");
        let file_error = |path: &std::path::Path, source: std::io::Error| KitError::LocalStack {
            bin: bin.clone(),
            reason: format!("{}: {source}", path.display()),
        };
        std::fs::create_dir_all(&data).map_err(|e| file_error(&data, e))?;
        let log = std::fs::File::create(&log_path).map_err(|e| file_error(&log_path, e))?;
        let log_err = log.try_clone().map_err(|e| file_error(&log_path, e))?;
        let mut child = Command::new(&bin)
            .args(["-m", "localstack.runtime.main"])
            .env("GATEWAY_LISTEN", format!("127.0.0.1:{port}"))
            .env("SERVICES", "kms")
            // No DNS server (port 53 is shared between parallel tests), no
            // certificate download, no analytics: loopback only.
            .env("DNS_ADDRESS", "0")
            .env("SKIP_SSL_CERT_DOWNLOAD", "1")
            .env("DISABLE_EVENTS", "1")
            .env("LOCALSTACK_VOLUME_DIR", &data)
            .env("FILESYSTEM_ROOT", &data)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| KitError::LocalStack {
                bin: bin.clone(),
                reason: source.to_string(),
            })?;
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Some(health) = get(port, "/_localstack/health").await {
                if health.contains("\"kms\": \"available\"")
                    || health.contains("\"kms\":\"available\"")
                {
                    return Ok(LocalStack { child, port, data });
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(KitError::LocalStack {
                    bin,
                    reason: format!("exited with {status}; {}", log_tail(&log_path)),
                });
            }
            if Instant::now() >= deadline {
                let _ = child.kill().await;
                return Err(KitError::LocalStack {
                    bin,
                    reason: format!(
                        "KMS not available within {STARTUP_DEADLINE:?} on port {port}; {}",
                        log_tail(&log_path)
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `http://127.0.0.1:<port>`: the `endpoint_url` of a signer.
    pub fn endpoint_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Freezes the process: KMS stops answering, keys are kept.
    pub fn pause(&self) {
        crate::signal::send(&self.child, "-STOP");
    }

    /// Lets a paused process run again.
    pub fn resume(&self) {
        crate::signal::send(&self.child, "-CONT");
    }

    /// Stops the process for good (KMS unreachable: connections refused).
    pub async fn stop(&mut self) {
        self.resume();
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
    }
}

impl Drop for LocalStack {
    fn drop(&mut self) {
        self.resume();
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// A plain HTTP/1.0 GET on loopback (no client dependency in the kit);
/// `None` while nothing answers.
async fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = tokio::time::timeout(
        Duration::from_secs(2),
        TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    .ok()?
    .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut answer))
        .await
        .ok()?
        .ok()?;
    answer.starts_with("HTTP/1.").then_some(answer)
}

/// The last lines LocalStack wrote, for an error that says why it did not
/// start.
fn log_tail(path: &std::path::Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n");
            format!("its output ({}), last lines:\n{tail}", path.display())
        }
        Err(err) => format!("its output {} unreadable: {err}", path.display()),
    }
}
