//! The defaults of the fixed sections of `config.toml`, as constants (shown
//! by `txmgr config check` and the shipped file) and as the functions serde
//! calls for a missing key.

use std::{
    net::{Ipv4Addr, SocketAddr, SocketAddrV4},
    time::Duration,
};

/// Default size of the PostgreSQL pool.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 32;
/// Default timeout for opening a database connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default HTTP listen address (loopback: safe without tokens).
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 8080));
/// Default limit on a request body.
pub const DEFAULT_BODY_LIMIT_BYTES: usize = 256 * 1024;
/// Default limit on a transaction's `data` field.
pub const DEFAULT_DATA_LIMIT_BYTES: usize = 128 * 1024;
/// Default time budget of one HTTP request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `http.max_valid_for`: a create's `valid_until` at most 30 days ahead.
pub const DEFAULT_MAX_VALID_FOR: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default `http.max_concurrent_requests`: API requests served at once.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 1024;
/// Default `http.max_long_polls`: `GET /v1/completions` waits at once.
pub const DEFAULT_MAX_LONG_POLLS: usize = 128;
/// Default `http.page_max_bytes`: JSON bytes of the items of one list page.
pub const DEFAULT_PAGE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Default `http.page_bytes_in_flight`: page bytes the node builds at once
/// over every list and feed request (16 pages of the default size).
pub const DEFAULT_PAGE_BYTES_IN_FLIGHT: usize = 64 * 1024 * 1024;
/// Default `http.readiness_interval`: how often `/readyz`'s state is refreshed.
pub const DEFAULT_READINESS_INTERVAL: Duration = Duration::from_secs(1);
/// Default `node.ingress_max_items`: creates waiting to be persisted, node-wide.
pub const DEFAULT_INGRESS_MAX_ITEMS: usize = 20_000;
/// Default `node.ingress_max_bytes`: their approximate memory, node-wide.
pub const DEFAULT_INGRESS_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Default chain polling interval (new blocks, receipts).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default timeout of one RPC call.
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `chain.sweep_interval`.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// Default `chain.unhealthy_after_failures`.
pub const DEFAULT_UNHEALTHY_AFTER_FAILURES: u32 = 3;
/// Default `chain.max_head_lag`.
pub const DEFAULT_MAX_HEAD_LAG: u64 = 5;
/// Default `chain.probe_max_backoff`.
pub const DEFAULT_PROBE_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Name of the endpoint given by the one-endpoint shorthand `chain.rpc_url`.
pub const DEFAULT_ENDPOINT_NAME: &str = "default";
/// Default `chain.receipt_workers` and `chain.finality_workers`.
pub const DEFAULT_TRACKER_WORKERS: u32 = 2;
/// Default lease duration.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(10);
/// Default lease renewal interval.
pub const DEFAULT_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(3);
/// Default tolerance for clock differences between nodes and the database.
pub const DEFAULT_CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(1);
/// Default `lease.idle_release_after`.
pub const DEFAULT_IDLE_RELEASE_AFTER: Duration = Duration::from_secs(30);
/// Default node heartbeat interval.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// Default interval between lease/peer discovery rounds.
pub const DEFAULT_DISCOVERY_INTERVAL: Duration = Duration::from_secs(5);
/// Default tracing filter.
pub const DEFAULT_LOG_LEVEL: &str = "info";

pub(super) fn default_max_connections() -> u32 {
    DEFAULT_MAX_CONNECTIONS
}

pub(super) fn default_connect_timeout() -> Duration {
    DEFAULT_CONNECT_TIMEOUT
}

pub(super) fn default_true() -> bool {
    true
}

pub(super) fn default_poll_interval() -> Duration {
    DEFAULT_POLL_INTERVAL
}

pub(super) fn default_rpc_timeout() -> Duration {
    DEFAULT_RPC_TIMEOUT
}

pub(super) fn default_sweep_interval() -> Duration {
    DEFAULT_SWEEP_INTERVAL
}

pub(super) fn default_unhealthy_after_failures() -> u32 {
    DEFAULT_UNHEALTHY_AFTER_FAILURES
}

pub(super) fn default_max_head_lag() -> u64 {
    DEFAULT_MAX_HEAD_LAG
}

pub(super) fn default_probe_max_backoff() -> Duration {
    DEFAULT_PROBE_MAX_BACKOFF
}

pub(super) fn default_batch_refusal_backoff() -> Duration {
    txmgr_actors::chain::DEFAULT_BATCH_REFUSAL_BACKOFF
}

pub(super) fn default_tracker_workers() -> u32 {
    DEFAULT_TRACKER_WORKERS
}
