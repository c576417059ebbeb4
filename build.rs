//! Records the commit the daemon is built from (`txmgr --version`,
//! `/healthz`, `txmgr_build_info`, the node row): `TXMGR_COMMIT` when the
//! builder sets it (a package built outside a clone), else the clone's
//! `git rev-parse --short=12 HEAD`, else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TXMGR_COMMIT");
    // A new commit moves HEAD or the branch it names.
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("TXMGR_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        })
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=TXMGR_COMMIT={commit}");
}
