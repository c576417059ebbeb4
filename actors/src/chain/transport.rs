//! The HTTP(S) JSON-RPC transport of every endpoint and of the remote
//! signer: a POST per request packet with reqwest, known by a name.
//!
//! alloy's own reqwest transport opens a tracing span carrying the full URL
//! on every request, so any debug-level log line written during a call
//! (hyper's connection pool, alloy's own) would print an API key kept in
//! the URL's path or query. This one records nothing but the name.

use std::{sync::Arc, task, time::Duration};

use alloy::{
    rpc::json_rpc::{RequestPacket, ResponsePacket},
    transports::{http::reqwest, TransportError, TransportErrorKind, TransportFut},
};

/// A JSON-RPC transport over HTTP(S) that never shows its URL.
#[derive(Clone)]
pub struct NamedHttp {
    client: reqwest::Client,
    url: Arc<reqwest::Url>,
    name: Arc<str>,
}

impl std::fmt::Debug for NamedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedHttp")
            .field("name", &self.name)
            .finish()
    }
}

impl NamedHttp {
    /// A transport posting to `url` with `client`, shown as `name`.
    pub fn new(client: reqwest::Client, url: reqwest::Url, name: &str) -> Self {
        Self {
            client,
            url: Arc::new(url),
            name: Arc::from(name),
        }
    }

    async fn post(self, request: RequestPacket) -> Result<ResponsePacket, TransportError> {
        let response = self
            .client
            .post(self.url.as_ref().clone())
            .json(&request)
            .headers(request.headers())
            .send()
            .await
            .map_err(|e| TransportErrorKind::custom(e.without_url()))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok())
            .map(Duration::from_secs);
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(err) if !status.is_success() => {
                return Err(TransportErrorKind::http_error_with_retry_after(
                    status.as_u16(),
                    format!("<failed to read response body: {}>", err.without_url()),
                    retry_after,
                ))
            }
            Err(err) => return Err(TransportErrorKind::custom(err.without_url())),
        };
        if !status.is_success() {
            // Some nodes answer JSON-RPC errors with a 4xx/5xx status.
            if let Ok(packet) = serde_json::from_slice::<ResponsePacket>(&body) {
                if packet.is_error() {
                    return Ok(packet);
                }
            }
            return Err(TransportErrorKind::http_error_with_retry_after(
                status.as_u16(),
                String::from_utf8_lossy(&body).into_owned(),
                retry_after,
            ));
        }
        serde_json::from_slice(&body)
            .map_err(|err| TransportError::deser_err(err, String::from_utf8_lossy(&body)))
    }
}

impl tower::Service<RequestPacket> for NamedHttp {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _cx: &mut task::Context<'_>) -> task::Poll<Result<(), Self::Error>> {
        // reqwest clients are always ready.
        task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: RequestPacket) -> Self::Future {
        let this = self.clone();
        let span = tracing::debug_span!("rpc", endpoint = %this.name);
        Box::pin(tracing::Instrument::instrument(this.post(request), span))
    }
}
