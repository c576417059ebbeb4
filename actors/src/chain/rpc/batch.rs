//! Several `eth_sendRawTransaction` calls in one JSON-RPC batch.
//!
//! One request instead of one per transaction: the node parses and answers
//! them together, and the leader's sends no longer wait one round trip
//! each. The calls are listed in nonce order: geth runs a batch's calls one
//! after the other, anvil starts them in order on one task, Hardhat (on an
//! interval) mined every batch of the tests; a pool that receives a later nonce first
//! queues it until the gap fills, and a node that refuses gaps answers
//! "nonce too high", retried with the same bytes.
//!
//! An endpoint that refuses batches (some providers do, or limit their
//! size) answers the batch as a whole — an HTTP 4xx, a single error object,
//! or no answer per call. The caller then sends the calls one by one, and
//! every later batch too (logged once). An answer that says nothing about
//! the batch form (a timeout, a lost connection, a 5xx, HTTP 401, 403, 407,
//! 408 or 429) is an unknown answer for each call, as it is for a single
//! send.

use std::sync::atomic::Ordering;

use alloy::{
    primitives::{Bytes, B256},
    providers::Provider,
    rpc::{client::BatchRequest, json_rpc::RpcError},
    transports::TransportErrorKind,
};

use super::EvmRpc;
use crate::chain::ChainError;

/// What the batch's own request came to.
enum Whole {
    /// Every call has its answer (or its own failure).
    Answered(Vec<Result<B256, ChainError>>),
    /// The endpoint refused the batch form: send one by one.
    Refused(String),
    /// Nothing is known of any call.
    Unknown(ChainError),
}

impl EvmRpc {
    /// `eth_sendRawTransaction` of every one of `raws` in one JSON-RPC
    /// batch, in this order; the answers in the same order. `None` when the
    /// endpoint refused the batch (see the module docs): the caller sends
    /// them one by one, and so does every later call.
    pub async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        if self.batches_refused() {
            return None;
        }
        match self.batch(raws).await {
            Whole::Answered(answers) => Some(answers),
            Whole::Unknown(err) => Some(raws.iter().map(|_| Err(err.clone())).collect()),
            Whole::Refused(reason) => {
                if !self.batches_refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(target: "txmgr::rpc", endpoint = %self.name, reason = %self.scrub(reason), "the endpoint refused a JSON-RPC batch: sending one transaction per request from now on");
                }
                None
            }
        }
    }

    /// True once the endpoint refused a batch.
    pub fn batches_refused(&self) -> bool {
        self.batches_refused.load(Ordering::Relaxed)
    }

    async fn batch(&self, raws: &[Bytes]) -> Whole {
        let mut batch = BatchRequest::new(self.provider.client());
        let mut waiters = Vec::with_capacity(raws.len());
        for raw in raws {
            match batch.add_call::<_, B256>("eth_sendRawTransaction", &(raw,)) {
                Ok(waiter) => waiters.push(waiter),
                // Serialising bytes cannot fail; were it to, nothing was sent.
                Err(err) => return Whole::Unknown(self.map_error(err)),
            }
        }
        let sent = match tokio::time::timeout(self.timeout, batch.send()).await {
            Ok(sent) => sent,
            Err(_) => {
                return Whole::Unknown(ChainError::Transport(format!(
                    "endpoint {}: timed out after {:?}",
                    self.name, self.timeout
                )))
            }
        };
        if let Err(err) = sent {
            return match refusal(&err) {
                Some(reason) => Whole::Refused(reason),
                None => Whole::Unknown(self.map_error(err)),
            };
        }
        let mut answers = Vec::with_capacity(waiters.len());
        let mut missing = 0;
        for waiter in waiters {
            // The batch is answered: every waiter's channel holds its answer.
            let answer = waiter.await;
            if matches!(
                answer,
                Err(RpcError::Transport(
                    TransportErrorKind::MissingBatchResponse(_)
                ))
            ) {
                missing += 1;
            }
            answers.push(answer.map_err(|e| self.map_error(e)));
        }
        if missing == answers.len() {
            return Whole::Refused("no answer for any call of the batch".to_owned());
        }
        Whole::Answered(answers)
    }
}

/// Why a failed batch request means "no batches here", or `None` when it
/// says nothing about the calls (timeouts, lost connections, overload).
fn refusal(err: &RpcError<TransportErrorKind>) -> Option<String> {
    match err {
        RpcError::Transport(kind) => {
            let status = kind.as_http_error()?.status;
            // Not about the batch form: a key refused (401, 403, 407), the
            // server's own timeout (408), overload (429).
            let about_the_request = !matches!(status, 401 | 403 | 407 | 408 | 429);
            ((400..500).contains(&status) && about_the_request).then(|| format!("HTTP {status}"))
        }
        RpcError::DeserError { err, .. } => Some(format!("answer not understood: {err}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_client_error_or_a_garbled_answer_refuses_batches() {
        let http = |status| TransportErrorKind::http_error(status, "x".into());
        assert!(refusal(&http(400)).is_some());
        assert!(refusal(&http(413)).is_some());
        assert!(refusal(&http(429)).is_none(), "overload is not a refusal");
        assert!(
            refusal(&http(401)).is_none(),
            "a refused key is not a refusal"
        );
        assert!(
            refusal(&http(403)).is_none(),
            "a refused key is not a refusal"
        );
        assert!(
            refusal(&http(502)).is_none(),
            "a gateway error says nothing"
        );
        assert!(refusal(&TransportErrorKind::custom_str("connection reset")).is_none());
        let garbled: RpcError<TransportErrorKind> = RpcError::deser_err(
            serde_json::from_str::<u8>("x").expect_err("not a number"),
            "x",
        );
        assert!(refusal(&garbled).is_some());
    }
}
