//! Several JSON-RPC endpoints of one chain behind one [`ChainClient`].
//!
//! ```text
//!   reads ──► the endpoint chosen for reads (sticky while healthy; else the
//!             healthy one with the highest head) ──► on a transport failure,
//!             the next healthy one, in the same call
//!   sends ──► every reachable endpoint at once (healthy, or only lagging)
//!             and every send-only one ──► answers combined (fanout);
//!             private sends go to the send-only ones alone (send_only.rs)
//!   monitor ─► eth_blockNumber on each endpoint every probe interval
//!              (unhealthy ones with backoff) ──► lag, health, choice
//! ```
//!
//! The choice for reads is sticky so that the head watcher follows one
//! backend's view of the chain: switching between equally good backends on
//! every call would show it their small disagreements as reorgs.

use std::{
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use tokio::sync::watch;

mod batch;
mod monitor;
mod send;
mod send_only;
mod types;

use types::check_chain;
pub use types::{ConnectError, EndpointSettings, EndpointSpec, EndpointStatus, WsTarget};

use super::{
    health::{Health, Unhealthy},
    redact::shown_url,
    ChainError, EvmRpc,
};
use crate::metrics::{RPC_ENDPOINT_CALLS, RPC_ENDPOINT_LATENCY, RPC_READ_SWITCHES};

struct Endpoint {
    rpc: EvmRpc,
    ws_url: Option<String>,
    shown: String,
    health: Mutex<Health>,
}

impl Endpoint {
    fn health(&self) -> MutexGuard<'_, Health> {
        // A panic while holding this lock leaves plain data behind; reading
        // it is still sound.
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct Inner {
    /// The endpoints read from (and sent to).
    endpoints: Vec<Endpoint>,
    /// The send-only endpoints: sent to, never read from.
    send_only: Vec<send_only::SendOnly>,
    tls: Arc<rustls::ClientConfig>,
    expected_chain_id: u64,
    settings: EndpointSettings,
    /// Index of the endpoint reads go to.
    reading: Mutex<usize>,
    ws: watch::Sender<Option<WsTarget>>,
}

/// Several endpoints of one chain; see the module docs. Cheap to clone.
#[derive(Clone)]
pub struct RpcEndpoints {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RpcEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inner.endpoints.iter().map(|e| e.rpc.name()).collect();
        f.debug_struct("RpcEndpoints")
            .field("endpoints", &names)
            .finish()
    }
}

impl RpcEndpoints {
    /// Checks every endpoint's chain id and starts the health monitor.
    ///
    /// An endpoint serving another chain is an error. One that cannot be
    /// reached (down, or its certificate does not verify) is an error only
    /// when no endpoint can be reached and `settings.start_out_of_service`
    /// is off; otherwise it starts unhealthy, is logged with the reason, and
    /// serves once a probe confirms its chain id.
    pub async fn connect(
        specs: Vec<EndpointSpec>,
        expected_chain_id: u64,
        timeout: Duration,
        tls: Arc<rustls::ClientConfig>,
        settings: EndpointSettings,
    ) -> Result<RpcEndpoints, ConnectError> {
        let (send_only_specs, specs): (Vec<EndpointSpec>, Vec<EndpointSpec>) =
            specs.into_iter().partition(|spec| spec.send_only);
        if specs.is_empty() {
            return Err(ConnectError::Setup(
                "no RPC endpoint to read from (every endpoint is send_only)".to_owned(),
            ));
        }
        let mut send_only = Vec::with_capacity(send_only_specs.len());
        for spec in &send_only_specs {
            let rpc = EvmRpc::new(&spec.name, &spec.url, timeout, &tls)
                .map_err(|e| ConnectError::Setup(e.to_string()))?
                .with_batch_refusal_backoff(settings.batch_refusal_backoff);
            send_only.push(send_only::SendOnly::new(rpc, &spec.url));
        }
        let mut endpoints = Vec::with_capacity(specs.len());
        for spec in &specs {
            let rpc = EvmRpc::new(&spec.name, &spec.url, timeout, &tls)
                .map_err(|e| ConnectError::Setup(e.to_string()))?
                .with_batch_refusal_backoff(settings.batch_refusal_backoff);
            endpoints.push(rpc);
        }
        let checks = endpoints
            .iter()
            .map(|rpc| check_chain(rpc, expected_chain_id));
        let results = futures::future::join_all(checks).await;
        let mut unreachable = Vec::new();
        for result in &results {
            match result {
                Err(ConnectError::Unreachable(reason)) => unreachable.push(reason.clone()),
                Err(fatal) => return Err(fatal.clone()),
                Ok(()) => {}
            }
        }
        if unreachable.len() == results.len() {
            if !settings.start_out_of_service {
                return Err(ConnectError::Unreachable(unreachable.join("; ")));
            }
            tracing::error!(target: "txmgr::rpc", chain_id = expected_chain_id, reasons = %unreachable.join("; "),
                "no RPC endpoint of the chain can be reached: it starts out of service and is probed with backoff");
        }
        let now = Instant::now();
        let endpoints: Vec<Endpoint> = endpoints
            .into_iter()
            .zip(specs)
            .zip(results)
            .map(|((rpc, spec), result)| {
                let mut health = Health::new(settings.policy, result.is_ok(), now);
                if let Err(err) = result {
                    tracing::warn!(target: "txmgr::rpc", endpoint = rpc.name(), error = %err, "RPC endpoint not reachable at start; it serves once a probe confirms its chain id");
                    health.failed(&err.to_string(), now);
                }
                Endpoint {
                    shown: shown_url(&spec.url),
                    ws_url: spec.ws_url,
                    rpc,
                    health: Mutex::new(health),
                }
            })
            .collect();
        let first = endpoints
            .iter()
            .position(|e| e.health().is_healthy())
            .unwrap_or(0);
        let (ws, _) = watch::channel(None);
        let set = RpcEndpoints {
            inner: Arc::new(Inner {
                endpoints,
                send_only,
                tls,
                expected_chain_id,
                settings,
                reading: Mutex::new(first),
                ws,
            }),
        };
        set.publish_ws(first);
        set.publish_gauges();
        tokio::spawn(monitor::run(Arc::downgrade(&set.inner)));
        Ok(set)
    }

    /// The state of every endpoint: the read ones in configuration order,
    /// then the send-only ones.
    pub fn status(&self) -> Vec<EndpointStatus> {
        let reading = self.reading();
        let now = Instant::now();
        self.inner
            .endpoints
            .iter()
            .enumerate()
            .map(|(index, endpoint)| {
                let health = endpoint.health();
                EndpointStatus {
                    name: endpoint.rpc.name().to_owned(),
                    url: endpoint.shown.clone(),
                    healthy: health.is_healthy(),
                    reads: index == reading,
                    send_only: false,
                    reason: health.verdict().map(|v| reason_label(&v).to_owned()),
                    head: health.head(),
                    lag: health.lag(),
                    consecutive_failures: health.consecutive_failures(),
                    last_error: health.last_error().map(str::to_owned),
                    since_secs: now.saturating_duration_since(health.since()).as_secs(),
                    batches_refused_secs_left: endpoint.rpc.batch_refusal_left().map(secs_up),
                }
            })
            .chain(self.send_only_status())
            .collect()
    }

    /// Follows the WebSocket target of the endpoint chosen for reads.
    pub fn ws_targets(&self) -> watch::Receiver<Option<WsTarget>> {
        self.inner.ws.subscribe()
    }

    fn reading(&self) -> usize {
        *self.inner.reading.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Healthy endpoints, the one chosen for reads first; every endpoint
    /// (chosen first) when none is healthy, since trying beats failing.
    fn read_order(&self) -> Vec<usize> {
        let reading = self.reading();
        let healthy: Vec<usize> = (0..self.inner.endpoints.len())
            .filter(|&i| self.inner.endpoints[i].health().is_healthy())
            .collect();
        let mut order = if healthy.is_empty() {
            (0..self.inner.endpoints.len()).collect()
        } else {
            healthy
        };
        if let Some(pos) = order.iter().position(|&i| i == reading) {
            order.remove(pos);
            order.insert(0, reading);
        }
        order
    }

    /// Runs a read on the chosen endpoint, failing over to the next one on a
    /// transport failure.
    pub(crate) async fn read<T, F, Fut>(&self, call: F) -> Result<T, ChainError>
    where
        F: Fn(EvmRpc) -> Fut,
        Fut: std::future::Future<Output = Result<T, ChainError>>,
    {
        let mut last = None;
        for index in self.read_order() {
            let endpoint = &self.inner.endpoints[index];
            let started = Instant::now();
            let result = call(endpoint.rpc.clone()).await;
            self.observe(index, result.as_ref().err(), started.elapsed());
            match result {
                Err(err @ ChainError::Transport(_)) => last = Some(err),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| ChainError::Transport("no RPC endpoint".to_owned())))
    }

    /// Books one call's outcome: transport failures count against the
    /// endpoint, answers (even JSON-RPC errors) for it.
    pub(super) fn observe(&self, index: usize, error: Option<&ChainError>, took: Duration) {
        let endpoint = &self.inner.endpoints[index];
        let name = endpoint.rpc.name().to_owned();
        let now = Instant::now();
        let (label, changed) = match error {
            Some(ChainError::Transport(text)) => {
                ("unavailable", endpoint.health().failed(text, now))
            }
            Some(ChainError::Rpc { .. }) => ("error", endpoint.health().answered(now)),
            None => ("ok", endpoint.health().answered(now)),
        };
        let chain = self.chain_label();
        metrics::counter!(RPC_ENDPOINT_CALLS, "chain" => chain.clone(), "endpoint" => name.clone(), "result" => label)
            .increment(1);
        metrics::histogram!(RPC_ENDPOINT_LATENCY, "chain" => chain, "endpoint" => name)
            .record(took.as_secs_f64());
        if changed {
            self.health_changed(index);
        }
    }

    fn health_changed(&self, index: usize) {
        let endpoint = &self.inner.endpoints[index];
        let health = endpoint.health().clone();
        match health.verdict() {
            None => {
                tracing::info!(target: "txmgr::rpc", chain = %self.chain_label(), endpoint = endpoint.rpc.name(), "RPC endpoint healthy")
            }
            Some(reason) => {
                tracing::warn!(target: "txmgr::rpc", chain = %self.chain_label(), endpoint = endpoint.rpc.name(), reason = reason_label(&reason), lag = health.lag(), last_error = health.last_error().unwrap_or(""), "RPC endpoint unhealthy")
            }
        }
        self.publish_gauges();
        self.choose();
    }

    /// Keeps the endpoint chosen for reads while it is healthy; otherwise
    /// moves to the healthy one with the highest head (configuration order
    /// breaks ties).
    fn choose(&self) {
        let mut reading = self.inner.reading.lock().unwrap_or_else(|e| e.into_inner());
        let endpoints = &self.inner.endpoints;
        if endpoints[*reading].health().is_healthy() {
            return;
        }
        let best = (0..endpoints.len())
            .filter(|&i| endpoints[i].health().is_healthy())
            .max_by_key(|&i| (endpoints[i].health().head(), std::cmp::Reverse(i)));
        let Some(best) = best else { return };
        let from = endpoints[*reading].rpc.name().to_owned();
        *reading = best;
        drop(reading);
        metrics::counter!(RPC_READ_SWITCHES, "chain" => self.chain_label()).increment(1);
        tracing::warn!(target: "txmgr::rpc", chain = %self.chain_label(), from, to = endpoints[best].rpc.name(), "reads switched to another RPC endpoint");
        self.publish_ws(best);
    }

    fn publish_ws(&self, index: usize) {
        let endpoint = &self.inner.endpoints[index];
        let target = endpoint.ws_url.as_ref().map(|url| WsTarget {
            name: Arc::from(endpoint.rpc.name()),
            url: url.clone(),
            tls: self.inner.tls.clone(),
        });
        self.inner.ws.send_replace(target);
    }
}

fn reason_label(reason: &Unhealthy) -> &'static str {
    match reason {
        Unhealthy::Unverified => "unverified",
        Unhealthy::Failing => "failing",
        Unhealthy::Lagging(_) => "lagging",
    }
}

/// Whole seconds, rounded up (a refusal with 0.4 s left still holds).
fn secs_up(left: Duration) -> u64 {
    left.as_secs() + u64::from(left.subsec_nanos() > 0)
}
