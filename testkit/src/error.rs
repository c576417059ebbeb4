//! The kit's one error type, for callers that report instead of panicking.

use std::{path::PathBuf, time::Duration};

/// Why a kit operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    /// The OS would not hand out a loopback port.
    #[error("probing a free loopback port: {0}")]
    FreePort(#[source] std::io::Error),
    /// The anvil binary could not be run at all.
    #[error("spawning {bin}: {source} (run scripts/install-anvil.sh or set ANVIL_BIN)")]
    Spawn {
        /// The binary tried.
        bin: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// LocalStack could not be run, or never reported KMS available.
    #[error("LocalStack ({bin}) did not start: {reason} (run scripts/install-localstack.sh or set LOCALSTACK_PYTHON)")]
    LocalStack {
        /// The Python tried.
        bin: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// anvil ran but never answered as expected (exited, wrong chain id, or
    /// silent past the startup deadline); the text carries anvil's stderr.
    #[error("anvil ({bin}) did not start: {reason}")]
    NotReady {
        /// The binary tried.
        bin: PathBuf,
        /// The last attempt's failure.
        reason: String,
    },
    /// A JSON-RPC call answered with an error or did not parse.
    #[error("{method}: {message}")]
    Rpc {
        /// The JSON-RPC method called.
        method: String,
        /// The transport's or node's message.
        message: String,
    },
    /// A JSON-RPC call got no answer in time (a wedged node).
    #[error("{method} timed out after {timeout:?}")]
    RpcTimeout {
        /// The JSON-RPC method called.
        method: String,
        /// The bound that passed.
        timeout: Duration,
    },
    /// A SoftHSM2 or OpenSC tool failed, or is not installed.
    #[error("{tool}: {reason}")]
    Tool {
        /// The tool (or package) tried.
        tool: String,
        /// What went wrong, with the tool's output.
        reason: String,
    },
}
