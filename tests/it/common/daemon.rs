//! Real `txmgr run` processes for multi-node tests: start, SIGKILL, SIGSTOP /
//! SIGCONT, SIGTERM, restart with the same identity; logs go to a file that
//! is printed when a test fails to find a node ready.

use std::{path::PathBuf, process::Stdio, time::Duration};

use serde_json::Value;
use tokio::process::{Child, Command};

use super::eventually;

/// Anvil's well-known dev keys 0..6 with their addresses (public test keys).
pub(crate) const DEV_KEYS: [(&str, &str); 6] = [
    (
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    ),
    (
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
        "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    ),
    (
        "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
        "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
    ),
    (
        "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
        "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
    ),
    (
        "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
        "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
    ),
    (
        "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
        "0x9965507d1a55bcc2695c58ba16fb37d819b0a4dc",
    ),
];

/// Environment variable holding dev key `i` for the daemons.
/// Sends SIGTERM to a daemon child and waits (30 s at most) for it to exit;
/// returns its exit status.
pub(crate) async fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let pid = child.id().expect("running");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -TERM {pid}");
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("daemon exits after SIGTERM")
        .expect("wait")
}

pub(crate) fn key_var(i: usize) -> String {
    format!("CHAOS_DEV_KEY_{i}")
}

/// One daemon process with a fixed identity (node id, port, config file).
pub(crate) struct Daemon {
    pub(crate) node_id: String,
    pub(crate) port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// Writes `config` (TOML) and starts `txmgr run` with it.
    pub(crate) async fn start(node_id: &str, port: u16, config: &str) -> Daemon {
        let dir = std::env::temp_dir();
        let stem = format!("txmgr-{node_id}-{}", uuid::Uuid::new_v4().simple());
        let path = dir.join(format!("{stem}.toml"));
        std::fs::write(&path, config).expect("write daemon config");
        let mut daemon = Daemon {
            node_id: node_id.to_owned(),
            port,
            config: path,
            log: dir.join(format!("{stem}.log")),
            child: None,
        };
        daemon.spawn();
        daemon
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("daemon log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_txmgr"));
        command
            .args(["run", "--config"])
            .arg(&self.config)
            .env("RUST_LOG", "info,txmgr=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        for (i, (key, _)) in DEV_KEYS.iter().enumerate() {
            command.env(key_var(i), key);
        }
        self.child = Some(command.spawn().expect("spawn txmgr"));
    }

    /// Rewrites the daemon's configuration file through `edit` (for a
    /// reload; a restart reads it too).
    pub(crate) fn edit_config(&self, edit: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(&self.config).expect("read daemon config");
        std::fs::write(&self.config, edit(text)).expect("write daemon config");
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .args([signal, &pid.to_string()])
                .status();
        }
    }

    /// Waits until `/readyz` answers 200.
    #[track_caller]
    pub(crate) fn ready<'a>(
        &'a self,
        client: &'a reqwest::Client,
    ) -> impl std::future::Future<Output = ()> + 'a {
        self.ready_at(client, self.base())
    }

    /// Waits until `<base>/readyz` answers 200 (`base` e.g. an `https://`
    /// origin); prints the node's log if it never does.
    #[track_caller]
    pub(crate) fn ready_at<'a>(
        &'a self,
        client: &'a reqwest::Client,
        base: String,
    ) -> impl std::future::Future<Output = ()> + 'a {
        let log = self.log.clone();
        let url = format!("{base}/readyz");
        async move {
            let probe = eventually(Duration::from_secs(60), Duration::from_millis(100), || {
                let request = client.get(&url).send();
                async move {
                    request
                        .await
                        .ok()
                        .filter(|r| r.status().is_success())
                        .map(|_| ())
                }
            });
            // Show the node's log if it never became ready.
            let guard = PrintLogOnPanic(log);
            probe.await;
            std::mem::forget(guard);
        }
    }

    /// SIGKILL: a crash; leases are not released.
    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
    }

    /// SIGTERM and wait: a graceful leave (leases released, node row removed).
    pub(crate) async fn stop(&mut self) {
        self.signal("-TERM");
        if let Some(mut child) = self.child.take() {
            match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill().await;
                }
            }
        }
    }

    /// SIGSTOP: the process freezes (its leases run out).
    pub(crate) fn freeze(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT.
    pub(crate) fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Starts the process again with the same node id, port and config.
    pub(crate) fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after kill or stop");
        self.spawn();
    }

    /// Waits up to `deadline` for the process to exit by itself; its exit
    /// status, or None when it still runs then (or was never started).
    pub(crate) async fn exited_within(
        &mut self,
        deadline: Duration,
    ) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let status = tokio::time::timeout(deadline, child.wait())
            .await
            .ok()?
            .ok()?;
        self.child = None;
        Some(status)
    }

    /// The node's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET /v1/ops/actors` of this node (no auth in these tests).
    pub(crate) async fn actors(&self, client: &reqwest::Client) -> Option<Value> {
        client
            .get(format!("{}/v1/ops/actors", self.base()))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()
    }

    /// `GET <path>` on this daemon as JSON; panics when it does not answer.
    pub(crate) async fn get_json(&self, client: &reqwest::Client, path: &str) -> Value {
        serde_json::from_str(&self.get_text(client, path).await)
            .unwrap_or_else(|e| panic!("{path}: not JSON: {e}"))
    }

    /// `GET <path>` on this daemon as text; panics when it does not answer.
    pub(crate) async fn get_text(&self, client: &reqwest::Client, path: &str) -> String {
        client
            .get(format!("{}{path}", self.base()))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .text()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A frozen process ignores SIGKILL only until continued; continue first.
        self.thaw();
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_file(&self.config);
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Prints a daemon log when a wait on it panics.
struct PrintLogOnPanic(PathBuf);

impl Drop for PrintLogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- daemon log {} ----\n{}",
                self.0.display(),
                std::fs::read_to_string(&self.0).unwrap_or_default()
            );
        }
    }
}
