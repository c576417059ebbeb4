//! # txmgr-actors — the engine of txmgr
//!
//! Everything that decides what happens to a transaction lives here; the
//! `txmgr` crate only wires it to HTTP, configuration and signals.
//!
//! ```text
//!   create ─► SubmitterActor (one per submitter, holds lease + fencing token)
//!                 │ every critical write ─► store::FencedTx ─► PostgreSQL
//!                 │                          (lease row FOR SHARE, token check)
//!   HeadWatcher ─► Receipt / Finality / Resubmit pools ─► messages ─┘
//! ```
//!
//! The daemon holds one [`node::Engine`]; the actor tree starts at
//! [`node::Engine::start`]: it spawns the [`supervisor::Supervisor`], whose
//! linked children are the head watcher, the three tracking pools
//! ([`supervisor::TrackerTree`]) and one SubmitterActor per active
//! submitter; it restarts any of them that fails. Dependencies run one way:
//! `node` → `supervisor` → `submitter` → `tracker` → `store`/`chain`/`domain`.
//!
//! - [`domain`]: identifiers and the transaction state machine's vocabulary.
//! - [`store`]: PostgreSQL access — migrations, lease + fencing, nonce cursor.
//! - [`chain`]: the chain port — RPC endpoints, fees, broadcast classification.
//! - [`signer`]: transaction signers (env key, keystore, remote).
//! - [`submitter`]: the SubmitterActor — leadership, nonces, sends, resubmits.
//! - [`tracker`]: following the chain — head watcher, receipt, finality and resubmit pools.
//! - [`node`]: this node's engine as the daemon sees it — the [`node::Engine`] facade, ops view and operator actions.
//! - [`supervisor`]: the root of the actor tree and the state it shares with the facade.
//! - [`cluster`]: membership and lease balancing.
//! - [`webhook`]: push delivery of the completion feed — one leased WebhookActor per webhook.
//! - [`intent_trace`]: one OpenTelemetry trace per intent, continued from its stored context on any node.
//! - [`metrics`]: names of the metrics the engine records.
//! - [`tls`]: the one TLS client policy (rustls, aws-lc-rs, public roots + private CA).

pub mod chain;
pub mod cluster;
pub mod domain;
pub mod intent_trace;
pub mod metrics;
pub mod node;
pub mod signer;
pub mod store;
pub mod submitter;
pub mod supervisor;
pub mod tls;
pub mod tracker;
pub mod webhook;

pub use domain::{AttemptKind, ChainId, SubState, SubmitterKey, TxState};
pub use store::{FencedTx, LeaseGuard, LeaseOutcome, LeaseOwner, LeaseRequest, StoreError};
