//! A private, throw-away PostgreSQL cluster with TLS on, for tests that need
//! a server certificate of their own (sslmode / sslrootcert). The cluster
//! lives in a fresh temporary directory, listens on a free loopback port and
//! is stopped (`-m immediate`) and removed when the value is dropped.
//!
//! PostgreSQL refuses to run as root: as root the server binaries run as the
//! `postgres` user through `runuser`, and the directory and the copies of the
//! certificate and key are handed to that user. Missing server binaries are
//! a hard failure, never a silent skip.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use super::{free_port, tls::Issued};

/// The unprivileged user that owns the cluster when the tests run as root.
const SERVER_USER: &str = "postgres";

/// Start attempts: a free port can be taken by someone else before the
/// server binds it.
const START_ATTEMPTS: usize = 3;

/// A running private cluster.
pub(crate) struct PrivatePg {
    dir: PathBuf,
    bin: PathBuf,
    /// `runuser -u postgres --` when running as root, empty otherwise.
    run_as: Vec<String>,
    port: u16,
}

impl PrivatePg {
    /// Creates a cluster presenting `issued` (certificate and key) and
    /// starts it with `ssl=on`; returns once it accepts connections.
    pub(crate) fn start_tls(issued: &Issued) -> PrivatePg {
        let bin = server_bin();
        let run_as = run_as();
        let dir = std::env::temp_dir().join(format!(
            "txmgr-pg-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        std::fs::create_dir_all(&dir).expect("create the cluster directory");
        let cert = dir.join("server.crt");
        let key = dir.join("server.key");
        std::fs::copy(&issued.cert_file, &cert).expect("copy the server certificate");
        std::fs::copy(&issued.key_file, &key).expect("copy the server key");
        // PostgreSQL refuses a key readable by others.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .expect("server key mode 0600");
        if !run_as.is_empty() {
            let chown = Command::new("chown")
                .arg("-R")
                .arg(SERVER_USER)
                .arg(&dir)
                .output()
                .expect("run chown");
            check(&chown, "chown of the cluster directory");
        }
        let mut cluster = PrivatePg {
            dir,
            bin,
            run_as,
            port: 0,
        };
        let initdb = cluster
            .server_command("initdb")
            .arg("-D")
            .arg(cluster.data())
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .output()
            .expect("run initdb");
        check(&initdb, "initdb");
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let options = format!(
                "-p {port} -c listen_addresses=127.0.0.1 -c ssl=on \
                 -c ssl_cert_file={cert} -c ssl_key_file={key} \
                 -c fsync=off -c synchronous_commit=off -k {dir}",
                cert = cert.display(),
                key = key.display(),
                dir = cluster.dir.display(),
            );
            let start = cluster
                .server_command("pg_ctl")
                .arg("-D")
                .arg(cluster.data())
                .arg("-l")
                .arg(cluster.log())
                .args(["-w", "-t", "30", "-o", &options, "start"])
                .output()
                .expect("run pg_ctl start");
            if start.status.success() {
                cluster.port = port;
                return cluster;
            }
            last = format!(
                "{}\n---- server log ----\n{}",
                describe(&start),
                std::fs::read_to_string(cluster.log()).unwrap_or_default()
            );
        }
        panic!(
            "private PostgreSQL with TLS did not start after {START_ATTEMPTS} attempts:\n{last}"
        );
    }

    /// `postgres://postgres@localhost:<port>/postgres?<params>`: `localhost`
    /// is a name of the test server certificate, so verify-full can check it.
    pub(crate) fn admin_url(&self, params: &str) -> String {
        let mut url = format!("postgres://postgres@localhost:{}/postgres", self.port);
        if !params.is_empty() {
            url.push('?');
            url.push_str(params);
        }
        url
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// A command running the server binary `name` as the cluster's owner.
    fn server_command(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        match self.run_as.split_first() {
            Some((runner, args)) => {
                let mut command = Command::new(runner);
                command.args(args).arg(program);
                command
            }
            None => Command::new(program),
        }
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        if self.port != 0 {
            let stopped = self
                .server_command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-m", "immediate", "-w", "stop"])
                .output();
            if let Err(e) = stopped {
                eprintln!("warning: stopping the private PostgreSQL cluster: {e}");
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("warning: removing {}: {e}", self.dir.display());
        }
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has `initdb`, or the
/// directory of an `initdb` on `PATH`.
fn server_bin() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return bin;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "the TLS tests need PostgreSQL server binaries (initdb, pg_ctl) to start a \
             private cluster: none in /usr/lib/postgresql/*/bin or on PATH; install the \
             postgresql server package"
        )
    })
}

/// `runuser -u postgres --` when the effective user is root (PostgreSQL
/// refuses to run as root), nothing otherwise.
fn run_as() -> Vec<String> {
    let id = Command::new("id").arg("-u").output().expect("run id -u");
    check(&id, "id -u");
    if String::from_utf8_lossy(&id.stdout).trim() != "0" {
        return Vec::new();
    }
    let user = Command::new("id")
        .arg(SERVER_USER)
        .output()
        .expect("run id postgres");
    assert!(
        user.status.success(),
        "running as root, so PostgreSQL must run as user `{SERVER_USER}`, which does not exist"
    );
    assert!(
        Path::new("/sbin/runuser").exists() || Path::new("/usr/sbin/runuser").exists(),
        "running as root but runuser is missing; cannot start PostgreSQL as {SERVER_USER}"
    );
    ["runuser", "-u", SERVER_USER, "--"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

fn check(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed: {}",
        describe(output)
    );
}

fn describe(output: &Output) -> String {
    format!(
        "{}\n---- stdout ----\n{}\n---- stderr ----\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
