//! A signer reached over HTTP JSON-RPC `eth_signTransaction` (Web3Signer,
//! geth/Clef style). Its answers are verified, never trusted.

use std::{borrow::Cow, error::Error as _, fmt, time::Duration};

use alloy::{
    consensus::{Transaction, TypedTransaction},
    primitives::{Address, Bytes},
    rpc::{
        client::RpcClient,
        types::{TransactionInput, TransactionRequest},
    },
    transports::{http::reqwest, TransportError, TransportErrorKind},
};
use async_trait::async_trait;
use serde::Deserialize;

use super::{
    bind_chain_id, endpoint::Endpoint, verify::verify_signed, SignedRaw, SignerError, TxSigner,
    TARGET,
};

/// JSON-RPC "method not found" (EIP-1474).
const METHOD_NOT_FOUND: i64 = -32601;

/// Largest answer read from a remote signer: a signed transaction with the
/// largest `data` the API accepts is well below this.
const MAX_SIGNER_RESPONSE_BYTES: usize = 4 << 20;

/// Longest remote error message we repeat, so a hostile signer cannot flood
/// logs through our errors.
const MAX_REMOTE_MESSAGE: usize = 200;

/// A remote signer holding the key for one address.
pub struct RemoteTxSigner {
    /// JSON-RPC client; the URL inside carries no credentials (they are in
    /// a sensitive default header), so transport logs cannot leak them.
    client: RpcClient,
    /// The URL for messages, password redacted.
    endpoint: String,
    /// The submitter address every signature must recover to.
    address: Address,
    /// Chain every signed transaction is bound to.
    chain_id: u64,
    /// Per-request HTTP timeout, repeated in error messages.
    timeout: Duration,
}

/// `eth_signTransaction` answers: Web3Signer returns the raw hex string,
/// geth returns `{ raw, tx }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SignTransactionAnswer {
    /// Raw EIP-2718 bytes.
    Raw(Bytes),
    /// Object with the raw bytes and the decoded transaction (ignored: the
    /// raw bytes are what gets broadcast, so they are what we check).
    Object {
        /// Raw EIP-2718 bytes.
        raw: Bytes,
    },
}

impl RemoteTxSigner {
    /// Prepares a client for `url` that signs for `address` on `chain_id`;
    /// every HTTP request is bounded by `timeout`. Does not contact the
    /// signer (see [`RemoteTxSigner::check_account`]).
    ///
    /// Basic-auth credentials in the URL are moved into an `Authorization`
    /// header marked sensitive.
    pub fn new(
        url: &str,
        address: Address,
        chain_id: u64,
        timeout: Duration,
        tls: &std::sync::Arc<rustls::ClientConfig>,
    ) -> Result<Self, SignerError> {
        let Endpoint {
            url: parsed,
            shown: endpoint,
            headers,
        } = Endpoint::parse(url)?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(rustls::ClientConfig::clone(tls))
            .timeout(timeout)
            .connect_timeout(timeout)
            .default_headers(headers)
            // Credentials must not follow a redirect to another host or to
            // plain http: a 3xx is an error.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                SignerError::Config(format!("{endpoint}: HTTP client: {}", e.without_url()))
            })?;
        Ok(Self {
            client: RpcClient::new(
                crate::chain::NamedHttp::new(
                    http,
                    parsed,
                    "remote-signer",
                    MAX_SIGNER_RESPONSE_BYTES,
                ),
                false,
            ),
            endpoint,
            address,
            chain_id,
            timeout,
        })
    }

    /// Checks with `eth_accounts` that the signer holds our address.
    ///
    /// A signer without `eth_accounts` ("method not found") passes with a
    /// warning: each signature is verified anyway, so a wrong account is
    /// caught on the first `sign`. Other errors are returned.
    pub async fn check_account(&self) -> Result<(), SignerError> {
        let call = self.client.request_noparams::<Vec<Address>>("eth_accounts");
        match call.await {
            Ok(accounts) if accounts.contains(&self.address) => Ok(()),
            Ok(accounts) => Err(SignerError::Config(format!(
                "remote signer {} does not hold {} ({} other accounts listed)",
                self.endpoint,
                self.address,
                accounts.len()
            ))),
            Err(TransportError::ErrorResp(payload))
                if is_method_not_found(&payload.code, &payload.message) =>
            {
                tracing::warn!(
                    target: TARGET,
                    endpoint = %self.endpoint,
                    address = %self.address,
                    "remote signer does not implement eth_accounts; the address is checked on every signature instead"
                );
                Ok(())
            }
            Err(e) => Err(self.rpc_error("eth_accounts", e)),
        }
    }

    /// Maps a JSON-RPC failure to transient (`Unavailable`) or definitive.
    fn rpc_error(&self, method: &str, e: TransportError) -> SignerError {
        let at = format!("remote signer {} {method}", self.endpoint);
        match e {
            TransportError::ErrorResp(p) => {
                SignerError::Refused(format!("{at}: error {}: {}", p.code, clip(&p.message)))
            }
            TransportError::Transport(kind) => match kind {
                TransportErrorKind::HttpError(h)
                | TransportErrorKind::HttpErrorWithRetryAfter { error: h, .. } => match h.status {
                    401 | 403 => SignerError::Config(format!(
                        "{at}: HTTP {} (credentials rejected)",
                        h.status
                    )),
                    408 | 429 | 500..=599 => {
                        SignerError::Unavailable(format!("{at}: HTTP {}", h.status))
                    }
                    status => SignerError::Refused(format!("{at}: HTTP {status}")),
                },
                TransportErrorKind::Custom(inner) => match inner.downcast_ref::<reqwest::Error>() {
                    Some(r) if r.is_timeout() => SignerError::Unavailable(format!(
                        "{at}: no answer within {:?}",
                        self.timeout
                    )),
                    // reqwest's own Display repeats the URL; its sources do not.
                    Some(r) => SignerError::Unavailable(format!("{at}: {}", source_chain(r))),
                    None => SignerError::Unavailable(format!("{at}: {inner}")),
                },
                other => SignerError::Unavailable(format!("{at}: {other}")),
            },
            // The body is not repeated: it is the signer's, not ours, to log.
            TransportError::DeserError { err, .. } => {
                SignerError::Refused(format!("{at}: unexpected answer: {err}"))
            }
            TransportError::NullResp => SignerError::Refused(format!("{at}: null answer")),
            other => SignerError::Refused(format!("{at}: {other}")),
        }
    }
}

#[async_trait]
impl TxSigner for RemoteTxSigner {
    fn address(&self) -> Address {
        self.address
    }

    fn kind(&self) -> &'static str {
        "remote"
    }

    async fn sign(&self, tx: TypedTransaction) -> Result<SignedRaw, SignerError> {
        let tx = bind_chain_id(tx, self.chain_id)?;
        let request = sign_request(&tx, self.address);
        let answer = self
            .client
            .request::<_, SignTransactionAnswer>("eth_signTransaction", (request,))
            .await
            .map_err(|e| self.rpc_error("eth_signTransaction", e))?;
        let raw = match answer {
            SignTransactionAnswer::Raw(raw) | SignTransactionAnswer::Object { raw } => raw,
        };
        verify_signed(&tx, &raw, self.address).inspect_err(|e| {
            if matches!(e, SignerError::WrongAddress { .. } | SignerError::Tampered { .. }) {
                tracing::error!(target: TARGET, endpoint = %self.endpoint, error = %e, "remote signer answer rejected");
            }
        })
    }
}

impl fmt::Debug for RemoteTxSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteTxSigner")
            .field("kind", &"remote")
            .field("endpoint", &self.endpoint)
            .field("address", &self.address)
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}

/// The `eth_signTransaction` parameter for `tx` from `from`: every field
/// set explicitly so the signer has nothing to fill in, and the calldata
/// under both `input` and `data` because signers disagree on the name.
fn sign_request(tx: &TypedTransaction, from: Address) -> TransactionRequest {
    let input = tx.input().clone();
    let request: TransactionRequest = tx.clone().into();
    let mut request = request.from(from);
    request.input = TransactionInput::both(input);
    request
}

/// Whether a JSON-RPC error means the method is not implemented; servers
/// differ between the standard code and a message.
fn is_method_not_found(code: &i64, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    *code == METHOD_NOT_FOUND
        || message.contains("method not found")
        || message.contains("does not exist")
        || message.contains("not supported")
}

/// A remote message cut to [`MAX_REMOTE_MESSAGE`] characters.
fn clip(message: &str) -> Cow<'_, str> {
    match message.char_indices().nth(MAX_REMOTE_MESSAGE) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &message[..cut])),
        None => Cow::Borrowed(message),
    }
}

/// The causes of a reqwest error joined with `: ` (connection refused,
/// DNS failure…), without reqwest's own URL-bearing message.
fn source_chain(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut next = e.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    if parts.is_empty() {
        "request failed".to_owned()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use alloy::{
        consensus::{TxEip1559, TxLegacy},
        primitives::{address, TxKind, U256},
    };

    #[test]
    fn debug_hides_credentials() {
        let s = RemoteTxSigner::new(
            "http://u:secret@127.0.0.1:9/",
            Address::ZERO,
            1,
            Duration::from_secs(1),
            &crate::tls::client_config(None).unwrap(),
        )
        .unwrap();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("secret") && shown.contains("remote"),
            "{shown}"
        );
    }

    #[test]
    fn invalid_url_or_scheme_is_config_error_without_echo() {
        for url in ["::nope secret", "ftp://host/secret"] {
            let tls = crate::tls::client_config(None).unwrap();
            let err = RemoteTxSigner::new(url, Address::ZERO, 1, Duration::from_secs(1), &tls)
                .unwrap_err();
            assert!(matches!(err, SignerError::Config(_)), "{err:?}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[test]
    fn answers_in_both_shapes_parse() {
        let raw: SignTransactionAnswer = serde_json::from_str(r#""0x0102""#).unwrap();
        assert!(matches!(raw, SignTransactionAnswer::Raw(b) if b.as_ref() == [1, 2]));
        let obj: SignTransactionAnswer =
            serde_json::from_str(r#"{"raw":"0x0102","tx":{"nonce":"0x0"}}"#).unwrap();
        assert!(matches!(obj, SignTransactionAnswer::Object { raw } if raw.as_ref() == [1, 2]));
    }

    #[test]
    fn request_carries_every_field() {
        let tx = TypedTransaction::Eip1559(TxEip1559 {
            chain_id: 31337,
            nonce: 9,
            gas_limit: 21_000,
            max_fee_per_gas: 30,
            max_priority_fee_per_gas: 2,
            to: TxKind::Call(address!("70997970C51812dc3A010C7d01b50e0d17dc79C8")),
            value: U256::from(1),
            input: Bytes::from_static(&[0xab]),
            ..Default::default()
        });
        let json = serde_json::to_value(sign_request(&tx, Address::repeat_byte(1))).unwrap();
        for (key, want) in [
            ("nonce", "0x9"),
            ("gas", "0x5208"),
            ("maxFeePerGas", "0x1e"),
            ("maxPriorityFeePerGas", "0x2"),
            ("chainId", "0x7a69"),
            ("type", "0x2"),
            ("value", "0x1"),
            ("input", "0xab"),
            ("data", "0xab"),
        ] {
            assert_eq!(json[key], want, "{key} in {json}");
        }
        let legacy = TypedTransaction::Legacy(TxLegacy {
            chain_id: Some(1),
            gas_price: 7,
            ..Default::default()
        });
        let json = serde_json::to_value(sign_request(&legacy, Address::ZERO)).unwrap();
        assert_eq!(json["gasPrice"], "0x7");
        assert_eq!(json["type"], "0x0");
    }

    #[test]
    fn method_not_found_is_recognised() {
        assert!(is_method_not_found(&-32601, "whatever"));
        assert!(is_method_not_found(
            &-32000,
            "the method eth_accounts does not exist/is not available"
        ));
        assert!(!is_method_not_found(&-32000, "request denied"));
    }
}
