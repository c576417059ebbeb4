//! Log output: text, pretty or JSON, filtered by `log.level` or `RUST_LOG`.
//! The engine's spans carry `submitter`, `node_id`, `fencing_token` (every
//! SubmitterActor message) and `tx_id`, `nonce` (per-transaction work).

use tracing_subscriber::{fmt, EnvFilter};

use crate::config::{LogConfig, LogFormat};

/// Installs the global tracing subscriber. `RUST_LOG` wins over `log.level`.
pub fn init_tracing(log: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    // A second initialisation (tests) is harmless: keep the first.
    let _ = match log.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Pretty => builder.pretty().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
