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

/// Largest JSON-RPC answer read from an endpoint: a block's receipts on a
/// busy chain run to tens of MiB; beyond this a misbehaving or hostile
/// server cannot make the node buffer more.
pub(crate) const MAX_RPC_RESPONSE_BYTES: usize = 64 << 20;

/// A JSON-RPC transport over HTTP(S) that never shows its URL and reads at
/// most `max_body` bytes of an answer.
#[derive(Clone)]
pub struct NamedHttp {
    client: reqwest::Client,
    url: Arc<reqwest::Url>,
    name: Arc<str>,
    max_body: usize,
}

impl std::fmt::Debug for NamedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedHttp")
            .field("name", &self.name)
            .finish()
    }
}

impl NamedHttp {
    /// A transport posting to `url` with `client`, shown as `name`, reading
    /// answers of up to `max_body` bytes (a larger one is a transport error).
    pub fn new(client: reqwest::Client, url: reqwest::Url, name: &str, max_body: usize) -> Self {
        Self {
            client,
            url: Arc::new(url),
            name: Arc::from(name),
            max_body,
        }
    }

    /// The body, read chunk by chunk up to `max_body` bytes.
    async fn bounded_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, String> {
        let too_large = || format!("answer larger than {} bytes", self.max_body);
        if response
            .content_length()
            .is_some_and(|length| length > self.max_body as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| e.without_url().to_string())?
        {
            if body.len() + chunk.len() > self.max_body {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
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
        let body = match self.bounded_body(response).await {
            Ok(body) => body,
            Err(err) if !status.is_success() => {
                return Err(TransportErrorKind::http_error_with_retry_after(
                    status.as_u16(),
                    format!("<failed to read response body: {err}>"),
                    retry_after,
                ))
            }
            Err(err) => return Err(TransportErrorKind::custom_str(&err)),
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
