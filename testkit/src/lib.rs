//! The one test kit of the txmgr workspace: what the integration tests, the
//! actor tests and the two benchmark binaries (`txmgr-bench`,
//! `txmgr-failover`) need to stand up a private chain and wait on it.
//!
//! ```text
//!   free_port() ──► Anvil::start*() ──► rpc_url() / provider() / cheat calls
//!                        │
//!                        └─ SIGKILLed on drop
//!   eventually() / wait_until(): poll with a deadline instead of sleeping
//! ```
//!
//! Conventions: plain functions panic with a message that says what failed
//! (they serve tests); `try_*` functions return [`KitError`] (they serve the
//! benchmarks, which report errors instead of panicking).

mod anvil;
mod dev_keys;
mod error;
mod localstack;
mod poll;
mod port;
mod signal;
mod softhsm;

pub use anvil::{parse_quantity, Anvil, AnvilOptions, Mining, CHAIN_ID};
pub use dev_keys::{DEV_ADDRESS_0, DEV_ADDRESS_1, DEV_PRIVATE_KEY_0};
pub use error::KitError;
pub use localstack::LocalStack;
pub use poll::{eventually, wait_until, DEFAULT_INTERVAL};
pub use port::{free_port, try_free_port};
pub use softhsm::{SoftHsm, SOFTHSM_MODULE, SOFTHSM_PIN};
