//! The chain port: what the engine needs to know about talking to EVM nodes.
//!
//! - [`classify_rpc_error`]: turns a node's answer to `eth_sendRawTransaction`
//!   into a [`BroadcastClass`] that the submitter acts on (DESIGN §8).

mod classify;

pub use classify::{classify_rpc_error, BroadcastClass, InvalidReason};

mod fee_cache;
mod rpc;

pub use fee_cache::FeeCache;
pub use rpc::{
    intent_request, BlockSummary, ChainClient, ChainError, ChainNonces, EvmRpc, FeeQuote,
    FinalityTag,
};
