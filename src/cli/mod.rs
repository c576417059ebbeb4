//! `txmgr tx|feed|ops`: the command line for people, on the Rust client
//! (`txmgr-client`). README "Clients" lists the commands and exit codes.
//!
//! ```text
//! args ─► Remote (url, token, CA) ─► txmgr_client::Client ─► daemon
//!                                          │
//!                 table (default) or JSON (--json) ◄─ answer / Error ─► exit code
//! ```

use std::{path::PathBuf, process::ExitCode};

use clap::{Args, Subcommand};
use txmgr_client::{Client, Error};

mod feed;
mod ops;
mod render;
mod tx;

pub(crate) use feed::FeedCommand;
pub(crate) use ops::OpsCommand;
pub(crate) use tx::TxCommand;

/// Exit codes scripts can rely on (README "Clients").
pub(crate) mod exit {
    /// Done (and, for a wait, CONFIRMED).
    pub(crate) const OK: u8 = 0;
    /// Anything not listed below.
    pub(crate) const OTHER: u8 = 1;
    /// Bad arguments, or a local file (token, CA) that cannot be read.
    pub(crate) const USAGE: u8 = 2;
    /// No answer from the daemon (refused, reset, timed out, TLS).
    pub(crate) const UNREACHABLE: u8 = 3;
    /// The daemon refused the request (4xx); its code is printed.
    pub(crate) const REFUSED: u8 = 4;
    /// The daemon failed (5xx), or the answer is not the API's JSON.
    pub(crate) const SERVER: u8 = 5;
    /// A wait ran out of time before the final state.
    pub(crate) const TIMEOUT: u8 = 6;
    /// The transaction is final but not CONFIRMED (FAILED_FINAL, REJECTED,
    /// CANCELLED).
    pub(crate) const NOT_CONFIRMED: u8 = 7;
}

/// Where the daemon is and how to talk to it.
#[derive(Debug, Clone, Args)]
pub(crate) struct Remote {
    /// The daemon's address.
    #[arg(
        long,
        env = "TXMGR_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// Bearer token; else TXMGR_TOKEN, else the file named by TXMGR_TOKEN_FILE
    /// (prefer those or --token-file: arguments are visible to other users).
    #[arg(long, global = true)]
    token: Option<String>,
    /// File holding the bearer token (surrounding blanks ignored).
    #[arg(long, global = true, conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// PEM file of a CA to trust besides the system's (a private CA in front of the daemon).
    #[arg(long, env = "TXMGR_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
    /// Attempts per request when there is no answer, a 429 or a 5xx (1 = no retry).
    #[arg(long, env = "TXMGR_RETRIES", default_value_t = 4, global = true)]
    retries: u32,
    /// Print the daemon's JSON instead of a table.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

impl Remote {
    fn client(&self) -> Result<Client, Failure> {
        let mut builder = Client::builder(&self.url).retry(txmgr_client::RetryPolicy {
            max_attempts: self.retries.max(1),
            ..txmgr_client::RetryPolicy::default()
        });
        // A flag wins over the environment, the token over a file.
        let read_file = |path: &PathBuf| {
            std::fs::read_to_string(path)
                .map(|token| token.trim().to_owned())
                .map_err(|e| Failure::usage(format!("token file {}: {e}", path.display())))
        };
        let token = match (&self.token, &self.token_file) {
            (Some(token), _) => Some(token.trim().to_owned()),
            (None, Some(path)) => Some(read_file(path)?),
            (None, None) => match (
                std::env::var("TXMGR_TOKEN")
                    .ok()
                    .filter(|t| !t.trim().is_empty()),
                std::env::var_os("TXMGR_TOKEN_FILE").map(PathBuf::from),
            ) {
                (Some(token), _) => Some(token.trim().to_owned()),
                (None, Some(path)) => Some(read_file(&path)?),
                (None, None) => None,
            },
        };
        if let Some(token) = token.filter(|token| !token.is_empty()) {
            builder = builder.token(token);
        }
        if let Some(ca) = &self.ca_file {
            builder = builder.ca_file(ca);
        }
        builder.build().map_err(|e| Failure::usage(e.to_string()))
    }
}

/// A command's failure: what to print and the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: exit::USAGE,
            message: message.into(),
        }
    }

    /// True when a create may or may not have been stored (no answer, a
    /// 5xx, a wait out of time): the caller should repeat it, same id.
    pub(crate) fn outcome_unknown(&self) -> bool {
        matches!(self.code, exit::UNREACHABLE | exit::SERVER | exit::TIMEOUT)
    }

    /// The same failure with `context` on a line of its own after it.
    pub(crate) fn context(mut self, context: String) -> Self {
        self.message = format!("{}\n  {context}", self.message);
        self
    }

    pub(crate) fn with_code(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        let code = match &error {
            Error::Api { status, .. } if *status < 500 => exit::REFUSED,
            // A 5xx, or an answer that is not the API's (a proxy's page,
            // a body this version cannot read).
            Error::Api { .. } | Error::UnexpectedAnswer { .. } => exit::SERVER,
            Error::Transport { .. } => exit::UNREACHABLE,
            Error::WaitTimeout { .. } => exit::TIMEOUT,
            Error::Config(_) => exit::USAGE,
            _ => exit::OTHER,
        };
        Failure {
            code,
            message: render::error_text(&error),
        }
    }
}

/// Runs a remote command on a small runtime of its own; the exit code.
pub(crate) fn run<F, Fut>(remote: &Remote, command: F) -> ExitCode
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<u8, Failure>>,
{
    let outcome = remote.client().and_then(|client| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::with_code(exit::OTHER, format!("async runtime: {e}")))?
            .block_on(command(client))
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("txmgr: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Parses a humantime duration argument (`30s`, `10m`).
pub(crate) fn duration(value: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(value).map_err(|e| format!("{value:?}: {e} (e.g. 30s, 10m)"))
}

/// The remote commands, as `main` dispatches them.
#[derive(Debug, Subcommand)]
pub(crate) enum RemoteCommand {
    /// Transactions: send, read, list, act, wait (a client token).
    Tx {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: TxCommand,
    },
    /// The completion feed.
    Feed {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: FeedCommand,
    },
    /// Operator views and actions (an `ops` token).
    Ops {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: OpsCommand,
    },
}

impl RemoteCommand {
    /// Runs the command; the process's exit code.
    pub(crate) fn run(self) -> ExitCode {
        match self {
            RemoteCommand::Tx { remote, command } => {
                run(&remote, |client| command.run(client, remote.json))
            }
            RemoteCommand::Feed { remote, command } => {
                run(&remote, |client| command.run(client, remote.json))
            }
            RemoteCommand::Ops { remote, command } => {
                run(&remote, |client| command.run(client, remote.json))
            }
        }
    }
}
