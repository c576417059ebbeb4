//! Sends over the endpoint set: the signed bytes go to every reachable
//! endpoint at once (and to every send-only one), the first acceptance
//! answers, and each endpoint's answer is booked and traced.

use std::time::Instant;

use alloy::primitives::B256;
use futures::StreamExt;

use super::RpcEndpoints;
use crate::chain::{classify_send, fanout, ChainClient, ChainError};

impl RpcEndpoints {
    /// Endpoints that take sends: every reachable one (a lagging backend's
    /// pool still reaches the network), or all when none is.
    pub(super) fn send_targets(&self) -> Vec<usize> {
        let reachable: Vec<usize> = (0..self.inner.endpoints.len())
            .filter(|&i| self.inner.endpoints[i].health().is_reachable())
            .collect();
        if reachable.is_empty() {
            (0..self.inner.endpoints.len()).collect()
        } else {
            reachable
        }
    }

    /// Sends the bytes to every reachable endpoint and combines the answers.
    /// Returns at the first acceptance; the other sends run to completion in
    /// the background, so the bytes reach every backend even when one
    /// accepts and loses them.
    pub(crate) async fn send(&self, raw: &alloy::primitives::Bytes) -> Result<B256, ChainError> {
        let targets = self.send_targets();
        let trace = crate::intent_trace::broadcast_parent();
        if let ([index], true) = (&targets[..], self.inner.send_only.is_empty()) {
            // One endpoint: nothing to run on in the background.
            return self.send_to(*index, raw, trace).await;
        }
        let mut sends = self.spawn_send_only(raw);
        for index in targets {
            let set = self.clone();
            let raw = raw.clone();
            sends.push(tokio::spawn(async move {
                set.send_to(index, &raw, trace).await
            }));
        }
        let mut answers = Vec::new();
        while let Some(joined) = sends.next().await {
            let answer = joined
                .unwrap_or_else(|e| Err(ChainError::Transport(format!("send task failed: {e}"))));
            if classify_send(&answer).counts_as_accepted() {
                return answer;
            }
            answers.push(answer);
        }
        fanout::combine(answers)
    }

    /// One endpoint's send, booked, and recorded as a span of the intent's
    /// trace when it is traced.
    async fn send_to(
        &self,
        index: usize,
        raw: &alloy::primitives::Bytes,
        trace: Option<crate::domain::TraceParent>,
    ) -> Result<B256, ChainError> {
        let endpoint = &self.inner.endpoints[index];
        let started = Instant::now();
        let started_at = std::time::SystemTime::now();
        let result = endpoint.rpc.send_raw(raw).await;
        self.observe(index, result.as_ref().err(), started.elapsed());
        if let Some(parent) = trace {
            trace_send(
                &parent,
                &self.chain_label(),
                endpoint.rpc.name(),
                started_at,
                &result,
            );
        }
        result
    }
}

/// Records one endpoint's answer to a broadcast as a span of the intent's
/// trace, classed as the chain port classes it.
pub(super) fn trace_send(
    parent: &crate::domain::TraceParent,
    chain: &str,
    endpoint: &str,
    started: std::time::SystemTime,
    result: &Result<B256, ChainError>,
) {
    let outcome = match result {
        Ok(_) => "accepted",
        Err(ChainError::Rpc { .. }) => "refused",
        Err(_) => "unavailable",
    };
    let error = result.as_ref().err().map(ToString::to_string);
    crate::intent_trace::record_send(parent, chain, endpoint, started, outcome, error);
}
