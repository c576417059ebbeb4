//! The endpoint monitor: asks every endpoint for its head on its own
//! schedule (every probe interval while healthy, with doubling backoff while
//! not), verifies the chain id of endpoints that were unreachable at start,
//! updates lags against the best head, and publishes the health gauges.

use std::{
    sync::Weak,
    time::{Duration, Instant},
};

use super::{check_chain, ConnectError, Endpoint, Inner, RpcEndpoints};
use crate::{
    chain::{ChainClient, ChainError},
    metrics::{RPC_ENDPOINT_HEAD_LAG, RPC_ENDPOINT_HEALTHY},
};

impl RpcEndpoints {
    /// One monitor round: probes the endpoints that are due, then updates
    /// lags against the best head.
    pub(super) async fn probe_round(&self) {
        let now = Instant::now();
        let due: Vec<usize> = (0..self.inner.endpoints.len())
            .filter(|&i| self.inner.endpoints[i].health().probe_due(now))
            .collect();
        if due.is_empty() {
            return;
        }
        let probes = due.iter().map(|&index| self.probe(index));
        let heads: Vec<(usize, Option<u64>)> = due
            .iter()
            .copied()
            .zip(futures::future::join_all(probes).await)
            .collect();
        let best = self
            .inner
            .endpoints
            .iter()
            .filter_map(|e| e.health().head())
            .max()
            .unwrap_or(0);
        let now = Instant::now();
        for (index, head) in heads {
            if let Some(head) = head {
                if self.inner.endpoints[index]
                    .health()
                    .head_seen(head, best, now)
                {
                    self.health_changed(index);
                }
            }
        }
        self.publish_gauges();
    }

    /// Probes one endpoint: its chain id until verified, then its head.
    async fn probe(&self, index: usize) -> Option<u64> {
        let endpoint = &self.inner.endpoints[index];
        let timeout = self.inner.settings.probe_timeout;
        if !endpoint.health().is_verified() {
            let started = Instant::now();
            let check = tokio::time::timeout(
                timeout,
                check_chain(&endpoint.rpc, self.inner.expected_chain_id),
            )
            .await
            .unwrap_or_else(|_| Err(ConnectError::Unreachable(timed_out(endpoint, timeout))));
            match check {
                Ok(()) => {
                    if endpoint.health().verified(Instant::now()) {
                        self.health_changed(index);
                    }
                }
                Err(ConnectError::Unreachable(reason)) => {
                    let err = ChainError::Transport(reason);
                    self.observe(index, Some(&err), started.elapsed());
                    return None;
                }
                Err(err) => {
                    tracing::error!(target: "txmgr::rpc", endpoint = endpoint.rpc.name(), error = %err, "RPC endpoint refused or serves another chain; it stays out of service");
                    self.observe(index, None, started.elapsed());
                    return None;
                }
            }
        }
        let started = Instant::now();
        let head = tokio::time::timeout(timeout, endpoint.rpc.block_number())
            .await
            .unwrap_or_else(|_| Err(ChainError::Transport(timed_out(endpoint, timeout))));
        self.observe(index, head.as_ref().err(), started.elapsed());
        head.ok()
    }
}

fn timed_out(endpoint: &Endpoint, timeout: Duration) -> String {
    format!(
        "endpoint {}: probe timed out after {timeout:?}",
        endpoint.rpc.name()
    )
}

/// Probes every endpoint on its schedule until the set is dropped.
pub(super) async fn run(inner: Weak<Inner>) {
    let period = match inner.upgrade() {
        Some(inner) => inner.settings.policy.probe_interval,
        None => return,
    };
    // Rounds run often enough for backoff deadlines to be met closely; each
    // endpoint's own schedule decides whether it is probed.
    let mut tick = tokio::time::interval(period.min(Duration::from_millis(250)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        RpcEndpoints { inner }.probe_round().await;
    }
}

impl RpcEndpoints {
    /// The `chain` label of this set's series.
    pub(super) fn chain_label(&self) -> String {
        crate::metrics::chain_label(self.inner.expected_chain_id.into())
    }

    /// Sets the health and lag gauges of every read endpoint.
    pub(super) fn publish_gauges(&self) {
        for endpoint in &self.inner.endpoints {
            let health = endpoint.health();
            let name = endpoint.rpc.name().to_owned();
            let chain = self.chain_label();
            metrics::gauge!(RPC_ENDPOINT_HEALTHY, "chain" => chain.clone(), "endpoint" => name.clone())
                .set(if health.is_healthy() { 1.0 } else { 0.0 });
            metrics::gauge!(RPC_ENDPOINT_HEAD_LAG, "chain" => chain, "endpoint" => name)
                .set(health.lag() as f64);
        }
    }
}
