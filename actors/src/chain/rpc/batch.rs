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
//! every later batch too for `chain.batch_refusal_backoff` (logged once per
//! refusal); then a batch is tried again, so a passing refusal (a proxy's
//! bad minute, a provider's limit lifted) does not cost one request per
//! transaction until the node restarts. An answer that says nothing about
//! the batch form (a timeout, a lost connection, a 5xx, HTTP 401, 403, 407,
//! 408 or 429) is an unknown answer for each call, as it is for a single
//! send.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Bytes, B256},
    providers::Provider,
    rpc::{client::BatchRequest, json_rpc::RpcError},
    transports::TransportErrorKind,
};

use super::EvmRpc;
use crate::chain::ChainError;

/// Default `chain.batch_refusal_backoff`: how long an endpoint that refused
/// a batch gets one request per transaction before a batch is tried again.
pub const DEFAULT_BATCH_REFUSAL_BACKOFF: Duration = Duration::from_secs(600);

/// When an endpoint last refused a batch (shared by the clones of its
/// client).
#[derive(Debug, Default)]
pub(super) struct BatchRefusal {
    at: Mutex<Option<Instant>>,
}

impl BatchRefusal {
    /// True when the last refusal is less than `backoff` old.
    fn within(&self, backoff: Duration) -> bool {
        self.left(backoff).is_some()
    }

    /// How long the last refusal still holds, if it does.
    fn left(&self, backoff: Duration) -> Option<Duration> {
        let elapsed = self.last()?.elapsed();
        (elapsed < backoff).then(|| backoff - elapsed)
    }

    /// Notes a refusal now; true when none was in force (worth a log line).
    fn refused(&self, backoff: Duration) -> bool {
        // A poisoned lock only means a panic elsewhere held it: the
        // Option inside is still whole.
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = at.is_none_or(|t| t.elapsed() >= backoff);
        *at = Some(Instant::now());
        fresh
    }

    fn last(&self) -> Option<Instant> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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
    /// endpoint refused a batch less than `batch_refusal_backoff` ago (see
    /// the module docs): the caller sends them one by one.
    pub async fn send_raw_batch(&self, raws: &[Bytes]) -> Option<Vec<Result<B256, ChainError>>> {
        if self.batches_refused() {
            return None;
        }
        match self.batch(raws).await {
            Whole::Answered(answers) => Some(answers),
            Whole::Unknown(err) => Some(raws.iter().map(|_| Err(err.clone())).collect()),
            Whole::Refused(reason) => {
                if self.batch_refusal.refused(self.batch_refusal_backoff) {
                    tracing::warn!(target: "txmgr::rpc", endpoint = %self.name, reason = %self.scrub(reason),
                        retry_in = ?self.batch_refusal_backoff,
                        "the endpoint refused a JSON-RPC batch: sending one transaction per request, then trying a batch again");
                }
                None
            }
        }
    }

    /// True while a batch refusal is in force (less than
    /// `batch_refusal_backoff` old).
    pub fn batches_refused(&self) -> bool {
        self.batch_refusal.within(self.batch_refusal_backoff)
    }

    /// How long the endpoint's refusal of a batch still holds, if it does
    /// (the ops view).
    pub fn batch_refusal_left(&self) -> Option<Duration> {
        self.batch_refusal.left(self.batch_refusal_backoff)
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
    fn a_refusal_holds_for_its_backoff_and_is_logged_once_while_it_does() {
        let (minute, none) = (Duration::from_secs(60), Duration::ZERO);
        let refusal = BatchRefusal::default();
        assert!(!refusal.within(minute), "never refused");
        assert!(refusal.refused(minute), "the first refusal is news");
        assert!(refusal.within(minute));
        assert!(refusal.left(minute).is_some_and(|left| left <= minute));
        assert!(!refusal.refused(minute), "one still in force is not");
        assert!(!refusal.within(none), "over once the back-off has passed");
        assert!(refusal.refused(none), "a refusal after that is news again");
    }

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
