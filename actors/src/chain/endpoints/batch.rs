//! A leader's batch of sends as one JSON-RPC batch request to every
//! endpoint that takes sends (README "How an intent is executed").
//!
//! Each endpoint gets the whole batch, its calls in nonce order; each
//! call's answers from the endpoints are combined as a single send's are
//! (`fanout`): it is accepted when one endpoint accepted it, and the
//! call returns as soon as every transaction has an acceptance (the other
//! endpoints' requests run on, so the bytes reach every backend). Once any
//! endpoint refused a batch, the chain sends one transaction per request.

use std::{sync::Arc, time::Instant};

use alloy::primitives::{Bytes, B256};
use futures::{stream::FuturesUnordered, StreamExt};

use super::RpcEndpoints;
use crate::{
    chain::{classify_send, fanout, ChainError},
    domain::TraceParent,
};

/// Every answer of one endpoint's batch, or `None` when it refused it.
type BatchAnswers = Option<Vec<Result<B256, ChainError>>>;

/// The batch's failure as the endpoint's books see it: a transport failure
/// only when no call was answered, a JSON-RPC error when every call was
/// refused, else none.
pub(super) fn failure(answers: &[Result<B256, ChainError>]) -> Option<&ChainError> {
    let transport = |a: &Result<B256, ChainError>| matches!(a, Err(ChainError::Transport(_)));
    if answers.iter().all(transport) {
        return answers.first().and_then(|a| a.as_ref().err());
    }
    if answers.iter().all(Result::is_err) {
        return answers
            .iter()
            .find(|a| !transport(a))
            .and_then(|a| a.as_ref().err());
    }
    None
}

impl RpcEndpoints {
    /// True while sends go out in JSON-RPC batches: `batch_sends` is on and
    /// no endpoint (read or send-only) has refused a batch.
    pub(crate) fn batches_sends(&self) -> bool {
        self.inner.settings.batch_sends
            && self
                .inner
                .endpoints
                .iter()
                .all(|e| !e.rpc.batches_refused())
            && self.inner.send_only.iter().all(|s| !s.batches_refused())
    }

    /// Sends `raws` in one JSON-RPC batch to every reachable endpoint and
    /// every send-only one, and answers each call (see the module docs);
    /// `None` when batches are off or an endpoint refused this one (send
    /// them one by one: the bytes are the same, so an endpoint that took
    /// them answers "already known").
    pub(crate) async fn send_batch(&self, raws: &[Bytes]) -> BatchAnswers {
        if !self.batches_sends() || raws.is_empty() {
            return None;
        }
        let targets = self.send_targets();
        // The spawned sends do not inherit the task's scope: passed along.
        let traces = crate::intent_trace::batch_parents();
        if let ([index], true) = (&targets[..], self.inner.send_only.is_empty()) {
            // One endpoint: nothing to run on in the background.
            return self.batch_to(*index, raws, traces.as_deref()).await;
        }
        let raws: Arc<[Bytes]> = raws.into();
        let mut sends = FuturesUnordered::new();
        for index in targets {
            let (set, raws, traces) = (self.clone(), raws.clone(), traces.clone());
            sends.push(tokio::spawn(async move {
                set.batch_to(index, &raws, traces.as_deref()).await
            }));
        }
        for index in 0..self.inner.send_only.len() {
            let (set, raws, chain) = (self.clone(), raws.clone(), self.chain_label());
            let traces = traces.clone();
            sends.push(tokio::spawn(async move {
                set.inner.send_only[index]
                    .send_batch(&raws, chain, traces.as_deref())
                    .await
            }));
        }
        let mut per_call: Vec<Vec<Result<B256, ChainError>>> = vec![Vec::new(); raws.len()];
        let mut refused = false;
        while let Some(joined) = sends.next().await {
            match joined {
                Ok(Some(answers)) if answers.len() == raws.len() => {
                    for (call, answer) in per_call.iter_mut().zip(answers) {
                        call.push(answer);
                    }
                }
                Ok(None) => refused = true,
                // A task that failed, or an answer of another length (not
                // built by `send_raw_batch`): nothing is known of any call.
                other => {
                    let text = match other {
                        Err(err) => format!("send task failed: {err}"),
                        _ => "a batch answer of the wrong length".to_owned(),
                    };
                    for call in &mut per_call {
                        call.push(Err(ChainError::Transport(text.clone())));
                    }
                }
            }
            if !refused && per_call.iter().all(|call| call.iter().any(accepted)) {
                return Some(per_call.into_iter().map(first_acceptance).collect());
            }
        }
        if refused {
            return None;
        }
        Some(per_call.into_iter().map(fanout::combine).collect())
    }

    /// One read endpoint's batch, booked as one call; each answered call of
    /// a traced intent (`traces`, in the batch's order) is a span.
    async fn batch_to(
        &self,
        index: usize,
        raws: &[Bytes],
        traces: Option<&[Option<TraceParent>]>,
    ) -> BatchAnswers {
        let endpoint = &self.inner.endpoints[index];
        let started = Instant::now();
        let started_at = std::time::SystemTime::now();
        let answers = endpoint.rpc.send_raw_batch(raws).await;
        if let Some(answers) = &answers {
            self.observe(index, failure(answers), started.elapsed());
            trace_batch(
                traces,
                &self.chain_label(),
                endpoint.rpc.name(),
                started_at,
                answers,
            );
        }
        answers
    }
}

/// One `txmgr.broadcast` span per answered call of a traced intent: the
/// batch's span of time, the call's own outcome. A refused batch (no
/// answers) records none: its transactions are sent one by one next, each
/// traced then.
pub(super) fn trace_batch(
    traces: Option<&[Option<TraceParent>]>,
    chain: &str,
    endpoint: &str,
    started: std::time::SystemTime,
    answers: &[Result<B256, ChainError>],
) {
    let Some(traces) = traces else {
        return;
    };
    for (parent, answer) in traces.iter().zip(answers) {
        if let Some(parent) = parent {
            super::send::trace_send(parent, chain, endpoint, started, answer);
        }
    }
}

fn accepted(answer: &Result<B256, ChainError>) -> bool {
    classify_send(answer).counts_as_accepted()
}

/// The first accepting answer of a call (there is one).
fn first_acceptance(answers: Vec<Result<B256, ChainError>>) -> Result<B256, ChainError> {
    let mut answers = answers;
    match answers.iter().position(accepted) {
        Some(at) => answers.swap_remove(at),
        None => fanout::combine(answers),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_fails_for_health_only_when_no_call_was_answered() {
        let down = || Err(ChainError::Transport("endpoint a: timed out".into()));
        let refused = Err(ChainError::Rpc {
            code: -32000,
            message: "nonce too low".into(),
        });
        let transport = |f: Option<&ChainError>| matches!(f, Some(ChainError::Transport(_)));
        let rpc = |f: Option<&ChainError>| matches!(f, Some(ChainError::Rpc { .. }));
        assert!(transport(failure(&[down(), down()])));
        assert!(rpc(failure(&[down(), refused.clone()])));
        assert!(rpc(failure(std::slice::from_ref(&refused))));
        assert!(failure(&[Ok(B256::ZERO), down()]).is_none());
        assert!(failure(&[Ok(B256::ZERO), refused]).is_none());
    }

    #[test]
    fn the_first_acceptance_wins_else_the_answers_combine() {
        let hash = B256::repeat_byte(1);
        let low = Err(ChainError::Rpc {
            code: -32000,
            message: "nonce too low".into(),
        });
        let known = first_acceptance(vec![low.clone(), Ok(hash)]);
        assert_eq!(known.expect("accepted"), hash);
        let combined = first_acceptance(vec![low]);
        assert!(combined.is_err());
    }
}
