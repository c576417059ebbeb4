//! Freezing and thawing a child process (SIGSTOP / SIGCONT): an outage that
//! keeps the process's state, for anvil and LocalStack alike.

use tokio::process::Child;

/// Sends `signal` (`-STOP`, `-CONT`) to `child` if it runs; best effort.
pub(crate) fn send(child: &Child, signal: &str) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status();
    }
}
