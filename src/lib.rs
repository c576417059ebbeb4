//! txmgr: a daemon that durably sends EVM transactions for many signing
//! addresses ("submitters"), one fenced owner per submitter at a time.
//!
//! ```text
//! config.toml + TXMGR_* env ──► config::Config ──► daemon (HTTP API, submitter actors)
//!                                                        │
//!                                          PostgreSQL (authority) ◄──► chain RPC
//! ```
//!
//! - [`build_info`]: the release and commit of this binary.
//! - [`config`]: loading, environment overrides and validation of the
//!   configuration; per-submitter settings resolution.
//! - [`daemon`]: wiring of one node — database, chain check, membership, shutdown.
//! - [`http`]: the client API — create intents, read transactions back — with
//!   one error shape and request limits.

pub mod build_info;
pub mod config;
pub mod daemon;
pub mod http;
