//! Send-only endpoints (`role = "send_only"`): a private mempool such as
//! Flashbots Protect or MEV Blocker, or a sequencer's direct endpoint.
//! Never read from and never probed; every send reaches them, and a private
//! send reaches them alone.
//!
//! ```text
//! public send  ──► reachable read endpoints + every send-only one ──► combined
//! private send ──► every send-only one, nothing else ──► accepted, or an
//!                  unknown answer (a refusal or outage is never a fallback
//!                  to public sending)
//! ```

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use alloy::primitives::{Bytes, B256};
use futures::{stream::FuturesUnordered, StreamExt};

use super::{EndpointStatus, RpcEndpoints};
use crate::{
    chain::{classify_send, fanout, redact::shown_url, ChainClient, ChainError, EvmRpc},
    metrics::{RPC_ENDPOINT_CALLS, RPC_ENDPOINT_LATENCY},
};

/// One send-only endpoint and what its last send showed.
pub(super) struct SendOnly {
    rpc: EvmRpc,
    shown: String,
    last: Mutex<LastSend>,
}

/// The outcome of the newest send to a send-only endpoint.
struct LastSend {
    /// It answered (accepted or refused); false after a transport failure.
    answered: bool,
    failures: u32,
    error: Option<String>,
    since: Instant,
}

impl SendOnly {
    pub(super) fn new(rpc: EvmRpc, url: &str) -> Self {
        Self {
            rpc,
            shown: shown_url(url),
            last: Mutex::new(LastSend {
                answered: true,
                failures: 0,
                error: None,
                since: Instant::now(),
            }),
        }
    }

    /// As the ops view shows it: `healthy` is whether its last send got an
    /// answer (it is never probed).
    pub(super) fn status(&self) -> EndpointStatus {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        EndpointStatus {
            name: self.rpc.name().to_owned(),
            url: self.shown.clone(),
            healthy: last.answered,
            reads: false,
            send_only: true,
            reason: (!last.answered).then(|| "failing".to_owned()),
            head: None,
            lag: 0,
            consecutive_failures: last.failures,
            last_error: last.error.clone(),
            since_secs: last.since.elapsed().as_secs(),
            batches_refused_secs_left: self.rpc.batch_refusal_left().map(super::secs_up),
        }
    }

    async fn send(
        &self,
        raw: &Bytes,
        chain: String,
        trace: Option<crate::domain::TraceParent>,
    ) -> Result<B256, ChainError> {
        let started = Instant::now();
        let started_at = std::time::SystemTime::now();
        let result = self.rpc.send_raw(raw).await;
        if let Some(parent) = trace {
            super::send::trace_send(&parent, &chain, self.rpc.name(), started_at, &result);
        }
        self.record(&result, started.elapsed(), chain);
        result
    }

    /// True once the endpoint refused a JSON-RPC batch.
    pub(super) fn batches_refused(&self) -> bool {
        self.rpc.batches_refused()
    }

    /// `raws` in one JSON-RPC batch, booked as one send (a transport
    /// failure only when no call was answered); `None` when refused.
    pub(super) async fn send_batch(
        &self,
        raws: &[Bytes],
        chain: String,
        traces: Option<&[Option<crate::domain::TraceParent>]>,
    ) -> Option<Vec<Result<B256, ChainError>>> {
        let started = Instant::now();
        let started_at = std::time::SystemTime::now();
        let answers = self.rpc.send_raw_batch(raws).await?;
        super::batch::trace_batch(traces, &chain, self.rpc.name(), started_at, &answers);
        let booked = match super::batch::failure(&answers) {
            Some(err) => Err(err.clone()),
            None => Ok(B256::ZERO),
        };
        self.record(&booked, started.elapsed(), chain);
        Some(answers)
    }

    fn record(&self, result: &Result<B256, ChainError>, took: Duration, chain: String) {
        let label = match result {
            Ok(_) => "ok",
            Err(ChainError::Rpc { .. }) => "error",
            Err(_) => "unavailable",
        };
        let name = self.rpc.name().to_owned();
        metrics::counter!(RPC_ENDPOINT_CALLS, "chain" => chain.clone(), "endpoint" => name.clone(), "result" => label)
            .increment(1);
        metrics::histogram!(RPC_ENDPOINT_LATENCY, "chain" => chain, "endpoint" => name)
            .record(took.as_secs_f64());
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let answered = !matches!(result, Err(ChainError::Transport(_)));
        if answered != last.answered {
            last.since = Instant::now();
        }
        last.answered = answered;
        if let Err(ChainError::Transport(text)) = result {
            last.failures = last.failures.saturating_add(1);
            last.error = Some(text.clone());
        } else {
            last.failures = 0;
        }
    }
}

impl RpcEndpoints {
    /// Sends to the send-only endpoints alone. Returns at the first
    /// acceptance (the other sends run on). Anything else — a refusal, an
    /// outage, no send-only endpoint at all — is an unknown answer
    /// ([`ChainError::Transport`]): the bytes may sit in a private pool, so
    /// the intent is retried there, never sent publicly instead.
    pub(crate) async fn send_private(&self, raw: &Bytes) -> Result<B256, ChainError> {
        if self.inner.send_only.is_empty() {
            return Err(ChainError::Transport(
                "private send: the chain has no send_only endpoint".to_owned(),
            ));
        }
        let mut sends = self.spawn_send_only(raw);
        let mut answers = Vec::new();
        while let Some(joined) = sends.next().await {
            let answer = joined
                .unwrap_or_else(|e| Err(ChainError::Transport(format!("send task failed: {e}"))));
            if classify_send(&answer).counts_as_accepted() {
                return answer;
            }
            answers.push(answer);
        }
        match fanout::combine(answers) {
            Err(ChainError::Rpc { message, .. }) => Err(ChainError::Transport(format!(
                "private send refused (an unknown answer: never sent publicly instead): {message}"
            ))),
            other => other,
        }
    }

    /// One task per send-only endpoint sending `raw`.
    pub(super) fn spawn_send_only(
        &self,
        raw: &Bytes,
    ) -> FuturesUnordered<tokio::task::JoinHandle<Result<B256, ChainError>>> {
        // Read here, in the broadcaster's task: the spawned sends do not
        // inherit its task-local trace.
        let trace = crate::intent_trace::broadcast_parent();
        (0..self.inner.send_only.len())
            .map(|index| {
                let set = self.clone();
                let raw = raw.clone();
                let chain = self.chain_label();
                tokio::spawn(
                    async move { set.inner.send_only[index].send(&raw, chain, trace).await },
                )
            })
            .collect()
    }

    /// The send-only endpoints' states, after the read endpoints'.
    pub(super) fn send_only_status(&self) -> impl Iterator<Item = EndpointStatus> + '_ {
        self.inner.send_only.iter().map(SendOnly::status)
    }
}
