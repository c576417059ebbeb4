//! What a call can fail with: an answer of the daemon ([`Error::Api`]), no
//! answer ([`Error::Transport`]), or a wait that ran out of time.

use std::time::Duration;

use txmgr_api::{ErrorCode, ErrorDetail};
use uuid::Uuid;

/// Every failure of a [`Client`](crate::Client) call.
///
/// ```no_run
/// # async fn demo(txmgr: txmgr_client::Client, body: txmgr_client::api::CreateBody) {
/// use txmgr_client::{api::ErrorCode, Error};
/// match txmgr.create(body).await {
///     Ok(created) => println!("{}", created.body.tx_id),
///     Err(e) if e.code() == Some(ErrorCode::IdempotencyConflict) => {
///         println!("request id taken by another intent's content")
///     }
///     Err(e @ Error::Api { .. }) => println!("refused: {e} (field {:?})", e.field()),
///     Err(e) => println!("try again later with request id {:?}: {e}", e.request_id()),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The daemon answered with an error: its machine `code`, the `field` at
    /// fault and the rest of the body in `detail`.
    #[error("{status} {}: {}", detail.code, detail.message)]
    Api {
        /// The HTTP status.
        status: u16,
        /// The body's `error` object (`code`, `message`, `field`, `tx_id`, …).
        detail: Box<ErrorDetail>,
        /// The `Retry-After` header, when the answer had one.
        retry_after: Option<Duration>,
        /// The create's request id (generated when the caller gave none):
        /// creating again with it lands on the same intent.
        request_id: Option<String>,
    },
    /// The daemon answered with something that is not the API's JSON (a
    /// proxy's error page, a truncated body).
    #[error("unexpected answer {status} from the daemon: {reason}")]
    UnexpectedAnswer {
        /// The HTTP status.
        status: u16,
        /// What was wrong with it.
        reason: String,
        /// The `Retry-After` header (whole seconds), when the answer had one.
        retry_after: Option<Duration>,
        /// The create's request id, as for [`Error::Api`].
        request_id: Option<String>,
    },
    /// No answer: connection refused or reset, timeout, TLS failure. A
    /// create may or may not have been stored: repeat it with `request_id`.
    #[error("no answer from the daemon: {source}")]
    Transport {
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
        /// The create's request id, as for [`Error::Api`].
        request_id: Option<String>,
    },
    /// [`Client::wait_final`](crate::Client::wait_final) ran out of time.
    #[error("{} of the transactions are not final after {waited:?}", pending.len())]
    WaitTimeout {
        /// The ids not final yet.
        pending: Vec<Uuid>,
        /// How long it waited.
        waited: Duration,
    },
    /// The client could not be built (a bad URL, an unreadable CA file).
    #[error("invalid client configuration: {0}")]
    Config(String),
}

impl Error {
    /// The daemon's machine code, for an [`Error::Api`] (see [`Error`]'s example).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Api { detail, .. } => Some(detail.code),
            _ => None,
        }
    }

    /// The input at fault (body field, query parameter or path segment),
    /// when the daemon named one (see [`Error`]'s example).
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Api { detail, .. } => detail.field.as_deref(),
            _ => None,
        }
    }

    /// The HTTP status, when there was an answer.
    ///
    /// ```
    /// let e = txmgr_client::Error::Config("x".into());
    /// assert_eq!(e.status(), None);
    /// ```
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } | Error::UnexpectedAnswer { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The create's request id, when the call was a create (see
    /// [`Error`]'s example): creating again with it is safe.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Error::Api { request_id, .. }
            | Error::UnexpectedAnswer { request_id, .. }
            | Error::Transport { request_id, .. } => request_id.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn with_request_id(mut self, id: &str) -> Self {
        if let Error::Api { request_id, .. }
        | Error::UnexpectedAnswer { request_id, .. }
        | Error::Transport { request_id, .. } = &mut self
        {
            *request_id = Some(id.to_owned());
        }
        self
    }
}

/// A `Result` with this crate's [`Error`].
///
/// ```
/// fn parse(url: &str) -> txmgr_client::Result<txmgr_client::Client> {
///     txmgr_client::Client::builder(url).build()
/// }
/// assert!(parse("http://127.0.0.1:8080").is_ok());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;
