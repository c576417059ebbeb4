//! The chain port: what the engine needs to know about talking to EVM nodes.
//!
//! - [`classify_rpc_error`]: turns a node's answer to `eth_sendRawTransaction`
//!   into a [`BroadcastClass`] that the submitter acts on (README "How an intent is executed").
//! - [`RpcEndpoints`]: one or several JSON-RPC endpoints with health, read
//!   fail-over and send fan-out, behind the [`ChainClient`] trait.
//! - [`EvmRpc`]: one HTTP(S) endpoint, known by name (never by URL).

mod classify;
mod classify_rules;

pub use classify::{classify_rpc_error, classify_send, BroadcastClass, InvalidReason};

mod endpoint_client;
mod endpoints;
mod fanout;
mod fee_cache;
mod health;
mod port;
mod redact;
mod rpc;
mod transport;

pub use crate::domain::FinalityTag;
pub use endpoints::{
    ConnectError, EndpointSettings, EndpointSpec, EndpointStatus, RpcEndpoints, WsTarget,
};
pub use fee_cache::FeeCache;
pub use health::HealthPolicy;
pub use port::{BlockSummary, ChainClient, ChainError, ChainNonces, FeeQuote};
pub use redact::shown_url;
pub(crate) use redact::{scrub, secret_renderings};
pub use rpc::{intent_request, EvmRpc, DEFAULT_BATCH_REFUSAL_BACKOFF};
pub use transport::NamedHttp;
