//! What this binary is: its release version and the commit it was built
//! from (`build.rs`), for `txmgr --version`, `/healthz`, the metric
//! `txmgr_build_info{version, commit}`, the node row and the ops views — so
//! a cluster running two releases during an upgrade shows it.

/// The release (`Cargo.toml`'s version; see `CHANGELOG.md`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (12 hex digits), or `unknown`.
pub const COMMIT: &str = env!("TXMGR_COMMIT");

/// `0.2.0 (commit 0123456789ab)`, as `txmgr --version` prints it.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TXMGR_COMMIT"),
    ")"
);

/// The newest migration this build knows (its schema version).
pub fn schema_version() -> i64 {
    txmgr_actors::store::MIGRATOR
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or_default()
}

/// This build as the node row records it.
pub fn node_build() -> txmgr_actors::store::node::NodeBuild {
    txmgr_actors::store::node::NodeBuild {
        version: VERSION,
        commit: COMMIT,
        schema_version: schema_version(),
    }
}
