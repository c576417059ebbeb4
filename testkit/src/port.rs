//! Free loopback ports for the processes a test or benchmark starts.

use crate::KitError;

/// A loopback port that was free a moment ago. Another process may take it
/// before the caller binds it, so callers that spawn a server retry.
pub fn try_free_port() -> Result<u16, KitError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(KitError::FreePort)
}

/// [`try_free_port`] for tests: panics when the OS has no port to give.
pub fn free_port() -> u16 {
    try_free_port().unwrap_or_else(|e| panic!("{e}"))
}
