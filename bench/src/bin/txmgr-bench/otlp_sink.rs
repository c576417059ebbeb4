//! A local OpenTelemetry collector that accepts every OTLP/HTTP export and
//! drops it: the daemon's tracing cost is measured without a collector's
//! own work (decoding, batching, storage) on the machine's cores.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use axum::{body::Bytes, extract::State, http::header, routing::post, Router};
use serde::Serialize;
use tokio::task::JoinHandle;

/// What the sink received.
#[derive(Debug, Default)]
struct Received {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// A running sink on a loopback port.
pub(crate) struct OtlpSink {
    /// `http://127.0.0.1:<port>`: the daemon's `telemetry.otlp_endpoint`.
    pub(crate) endpoint: String,
    received: Arc<Received>,
    server: JoinHandle<()>,
}

/// The sink's counts and the daemon's own, at the end of a pass.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TraceExport {
    /// Export requests the sink answered.
    pub(crate) requests: u64,
    /// Their protobuf bytes.
    pub(crate) bytes: u64,
    /// `txmgr_trace_spans_exported_total` of the daemon.
    pub(crate) spans_exported: f64,
    /// `txmgr_trace_spans_dropped_total` of the daemon (every reason): a
    /// dropped span is work not done, so the measured cost is low by it.
    pub(crate) spans_dropped: f64,
}

impl OtlpSink {
    /// Binds a free loopback port and answers `POST /v1/traces` with 200 and
    /// an empty `ExportTraceServiceResponse`.
    pub(crate) async fn start() -> anyhow::Result<OtlpSink> {
        let received = Arc::new(Received::default());
        let app = Router::new()
            .route("/v1/traces", post(accept))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("txmgr-bench: OTLP sink stopped: {e}");
            }
        });
        Ok(OtlpSink {
            endpoint,
            received,
            server,
        })
    }

    /// Requests and bytes so far.
    pub(crate) fn received(&self) -> (u64, u64) {
        (
            self.received.requests.load(Ordering::Relaxed),
            self.received.bytes.load(Ordering::Relaxed),
        )
    }
}

impl Drop for OtlpSink {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Counts one export and drops it. An empty body is the protobuf encoding
/// of an `ExportTraceServiceResponse` without partial-success details.
async fn accept(
    State(received): State<Arc<Received>>,
    body: Bytes,
) -> ([(header::HeaderName, &'static str); 1], Bytes) {
    received.requests.fetch_add(1, Ordering::Relaxed);
    received
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Bytes::new(),
    )
}
