//! Rust client of [txmgr](https://github.com/txmgr/txmgr), the daemon that
//! sends EVM transactions for backend services (its README, "Clients").
//!
//! ```no_run
//! use std::time::Duration;
//! use txmgr_client::{api::CreateBody, Client};
//!
//! # async fn demo() -> txmgr_client::Result<()> {
//! let txmgr = Client::builder("http://127.0.0.1:8080").token("secret").build()?;
//! // The request id makes every retry — ours or yours after a crash — land
//! // on the same intent: derive it from your own record (an order id).
//! let created = txmgr
//!     .create(CreateBody {
//!         submitter: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(),
//!         to: Some("0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()),
//!         value: Some(1_000_000_000_000_000u128.into()),
//!         request_id: Some("order-42".into()),
//!         ..CreateBody::default()
//!     })
//!     .await?;
//! let tx = txmgr.wait_final(created.body.tx_id, Duration::from_secs(600)).await?;
//! println!("{} {:?}", tx.state, tx.mined_tx_hash);
//! # Ok(())
//! # }
//! ```
//!
//! Every call repeats what may pass ([`RetryPolicy`]): no answer, 429 and
//! 5xx, never earlier than `Retry-After`; a 4xx is returned at once as
//! [`Error::Api`] with the daemon's machine code and the field at fault.

use std::{path::Path, time::Duration};

use reqwest::{Method, StatusCode, Url};
use serde::{de::DeserializeOwned, Serialize};

mod error;
mod feed;
pub mod ops;
mod retry;
mod transactions;
pub mod webhook;

pub use error::{Error, Result};
pub use feed::{FeedQuery, Flow};
pub use retry::RetryPolicy;
pub use transactions::{Created, ListQuery};
/// The wire types, shared with the daemon.
pub use txmgr_api as api;

use retry::Repeat;

/// A handle on one daemon (or a load balancer in front of several). Cheap
/// to clone: clones share the connection pool. Built with [`Client::builder`]:
///
/// ```
/// let txmgr = txmgr_client::Client::builder("http://127.0.0.1:8080").build()?;
/// let for_a_task = txmgr.clone();
/// # Ok::<(), txmgr_client::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
    retry: RetryPolicy,
}

/// Builds a [`Client`]: address, token, trust, timeouts, retries.
///
/// ```
/// let client = txmgr_client::Client::builder("http://127.0.0.1:8080").token("t").build();
/// assert!(client.is_ok());
/// ```
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    ca_file: Option<std::path::PathBuf>,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
}

/// The token is never printed.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// The token is never printed.
impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca_file", &self.ca_file)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts a client of the daemon at `base_url` (`http://` or `https://`).
    ///
    /// ```
    /// let client = txmgr_client::Client::builder("https://txmgr.internal:8443")
    ///     .token("…")
    ///     .build();
    /// assert!(client.is_ok());
    /// ```
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            token: None,
            ca_file: None,
            timeout: Duration::from_secs(75),
            connect_timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
        }
    }

    /// The retry policy of this client's calls.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// A copy of this client with another retry policy (sharing connections).
    ///
    /// ```
    /// # let client = txmgr_client::Client::builder("http://127.0.0.1:8080").build().unwrap();
    /// let once = client.with_retry(txmgr_client::RetryPolicy { max_attempts: 1, ..Default::default() });
    /// assert_eq!(once.retry_policy().max_attempts, 1);
    /// ```
    pub fn with_retry(&self, retry: RetryPolicy) -> Client {
        Client {
            retry,
            ..self.clone()
        }
    }

    /// GETs the path of `segments` (each percent-encoded) with `query`
    /// pairs and reads the JSON answer.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<T> {
        self.send_json(
            Method::GET,
            segments,
            query,
            None::<&()>,
            Repeat::Safe,
            None,
        )
        .await
        .map(|(_, body)| body)
    }

    /// Sends one request, repeating it as `repeat` allows, and reads the
    /// JSON answer with its status.
    /// `timeout` replaces the client's for each attempt (a long poll).
    pub(crate) async fn send_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&B>,
        repeat: Repeat,
        timeout: Option<Duration>,
    ) -> Result<(StatusCode, T)> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Error::Config(format!("address {} cannot take a path", self.base)))?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| Error::Config(format!("body: {e}")))?;
        let mut attempt = 1;
        loop {
            let mut request = self.http.request(method.clone(), url.clone());
            if let Some(timeout) = timeout {
                request = request.timeout(timeout);
            }
            if let Some(token) = &self.token {
                request = request.bearer_auth(token);
            }
            // Every POST says JSON, even with no body: the daemon refuses
            // others (415), so that no web page can post to it cross-site.
            if method != Method::GET {
                request = request.header(reqwest::header::CONTENT_TYPE, "application/json");
            }
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let error = match request.send().await {
                Ok(response) => match read_answer(response).await {
                    Ok(answer) => return Ok(answer),
                    Err(error) => error,
                },
                Err(source) => Error::Transport {
                    source,
                    request_id: None,
                },
            };
            let Some(wait) = self.retry.delay(attempt, &error, repeat) else {
                return Err(error);
            };
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

/// The answer's JSON on 2xx; its [`Error`] otherwise.
async fn read_answer<T: DeserializeOwned>(response: reqwest::Response) -> Result<(StatusCode, T)> {
    let status = response.status();
    let retry_after = retry::retry_after(response.headers());
    let bytes = response.bytes().await.map_err(|source| Error::Transport {
        source,
        request_id: None,
    })?;
    if status.is_success() {
        return serde_json::from_slice(&bytes)
            .map(|body| (status, body))
            .map_err(|e| Error::UnexpectedAnswer {
                status: status.as_u16(),
                reason: format!("the body is not the expected JSON: {e}"),
                retry_after,
                request_id: None,
            });
    }
    match serde_json::from_slice::<api::ErrorResponse>(&bytes) {
        Ok(body) => Err(Error::Api {
            status: status.as_u16(),
            detail: Box::new(body.error),
            retry_after,
            request_id: None,
        }),
        Err(_) => Err(Error::UnexpectedAnswer {
            status: status.as_u16(),
            reason: format!(
                "not an error body of the API: {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ),
            retry_after,
            request_id: None,
        }),
    }
}

impl ClientBuilder {
    /// The bearer token (README "Security": `txmgr token new`).
    ///
    /// ```
    /// let token = std::env::var("TXMGR_TOKEN").unwrap_or_default();
    /// let client = txmgr_client::Client::builder("http://127.0.0.1:8080").token(token).build();
    /// assert!(client.is_ok());
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Also trust the CA certificates of this PEM file (a private CA in
    /// front of the daemon); the system's roots stay trusted. An unreadable
    /// file fails [`ClientBuilder::build`].
    ///
    /// ```
    /// let client = txmgr_client::Client::builder("https://txmgr.internal:8443")
    ///     .ca_file("/nonexistent/ca.pem")
    ///     .build();
    /// assert!(matches!(client, Err(txmgr_client::Error::Config(_))));
    /// ```
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.ca_file = Some(path.as_ref().to_owned());
        self
    }

    /// Longest time one request may take, answer included (default 75 s:
    /// above the feed's longest long poll, 60 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = txmgr_client::Client::builder("http://127.0.0.1:8080")
    ///     .timeout(Duration::from_secs(30))
    ///     .connect_timeout(Duration::from_secs(2))
    ///     .build();
    /// assert!(client.is_ok());
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Longest time to connect (default 5 s); see [`ClientBuilder::timeout`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How calls are repeated ([`RetryPolicy::default`] otherwise).
    ///
    /// ```
    /// use txmgr_client::{Client, RetryPolicy};
    /// let never = Client::builder("http://127.0.0.1:8080")
    ///     .retry(RetryPolicy { max_attempts: 1, ..RetryPolicy::default() })
    ///     .build()?;
    /// assert_eq!(never.retry_policy().max_attempts, 1);
    /// # Ok::<(), txmgr_client::Error>(())
    /// ```
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The client; fails on a bad URL or an unreadable CA file.
    ///
    /// ```
    /// let bad = txmgr_client::Client::builder("ftp://txmgr").build();
    /// assert!(matches!(bad, Err(txmgr_client::Error::Config(_))));
    /// ```
    pub fn build(self) -> Result<Client> {
        let mut base = Url::parse(&self.base)
            .map_err(|e| Error::Config(format!("address {:?}: {e}", self.base)))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "address {:?}: the scheme must be http or https",
                self.base
            )));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let mut http = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .user_agent(concat!("txmgr-client/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &self.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| Error::Config(format!("CA file {}: {e}", path.display())))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| Error::Config(format!("CA file {}: {e}", path.display())))?
            {
                http = http.add_root_certificate(cert);
            }
        }
        let http = http
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Client {
            http,
            base,
            token: self.token,
            retry: self.retry,
        })
    }
}
