//! Log output: text, pretty or JSON, filtered by `log.level` or `RUST_LOG`.
//! The engine's spans carry `submitter`, `node_id`, `fencing_token` (every
//! SubmitterActor message) and `tx_id`, `nonce` (per-transaction work).
//!
//! With `[telemetry] otlp_endpoint`, traces too: the SDK's batch processor
//! exports over OTLP/HTTP on its own thread, with a client under the node's
//! TLS policy (its roots, no redirects); a bounded count in front of it
//! drops (and counts) spans beyond `max_queue`, so a slow or dead collector
//! never holds the pipeline. The HTTP create span comes from `tracing`
//! (target [`OTEL_TARGET`], through `tracing-opentelemetry`); the engine's
//! per-intent spans use the OpenTelemetry API ([`txmgr_actors::intent_trace`]).

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use opentelemetry::{trace::TracerProvider as _, KeyValue};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{
        BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider, SpanData, SpanExporter,
        SpanProcessor,
    },
    Resource,
};
use tracing_subscriber::{
    filter::Targets, fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer,
};
use txmgr_actors::metrics::{TRACE_SPANS_DROPPED, TRACE_SPANS_EXPORTED};

use crate::config::{LogConfig, LogFormat, TelemetryConfig};

pub use txmgr_actors::intent_trace::OTEL_TARGET;

/// What must outlive the daemon's work: flushes and stops the exporter.
#[derive(Debug)]
pub struct TracingGuard {
    provider: Option<SdkTracerProvider>,
}

impl TracingGuard {
    /// Exports what is queued (within the export timeout) and stops. Call
    /// outside the async runtime: the exporter's client blocks.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(err) = provider.shutdown() {
                tracing::warn!(target: "txmgr::trace", error = %err, "trace exporter did not shut down cleanly");
            }
        }
    }
}

/// Installs the global tracing subscriber (and, with an OTLP endpoint, the
/// trace exporter). `RUST_LOG` wins over `log.level`. Call outside the
/// async runtime.
pub fn init_tracing(log: &LogConfig, telemetry: &TelemetryConfig, node_id: &str) -> TracingGuard {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt_layer = fmt::layer().with_ansi(ansi).with_writer(std::io::stderr);
    let fmt_layer = match log.format {
        LogFormat::Json => fmt_layer.json().boxed(),
        LogFormat::Pretty => fmt_layer.pretty().boxed(),
        LogFormat::Text => fmt_layer.boxed(),
    }
    .with_filter(filter);
    let (provider, exporter_error) = match exporting_provider(telemetry, node_id) {
        Ok(provider) => (provider, None),
        Err(err) => (None, Some(err)),
    };
    let otel_layer = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(txmgr_actors::intent_trace::SCOPE))
            .with_filter(Targets::new().with_target(OTEL_TARGET, tracing::Level::INFO))
    });
    // A second initialisation (tests) is harmless: keep the first.
    let _ = tracing_subscriber::registry()
        .with(fmt_layer)
        .with(otel_layer)
        .try_init();
    if let Some(err) = exporter_error {
        tracing::error!(target: "txmgr::trace", error = format!("{err:#}"), "trace exporter not started: no traces");
    }
    if let Some(provider) = &provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        txmgr_actors::intent_trace::enable();
        tracing::info!(target: "txmgr::trace",
            endpoint = %crate::config::shown_url(telemetry.otlp_endpoint.as_deref().unwrap_or_default()),
            sample_ratio = telemetry.sample_ratio, "exporting traces over OTLP/HTTP");
    }
    TracingGuard { provider }
}

/// The exporter's HTTP client, under the rules of every other connection
/// of the node: Mozilla's roots plus `telemetry.ca_file` (not the OS store,
/// which the library's default client would use), the export timeout, and
/// no redirects — a 3xx could send the spans and the exporter's headers
/// (`OTEL_EXPORTER_OTLP_HEADERS`) to another host or to plain http.
fn exporter_client(telemetry: &TelemetryConfig) -> anyhow::Result<reqwest::blocking::Client> {
    use anyhow::Context;
    let tls = txmgr_actors::tls::client_config(telemetry.ca_file.as_deref())
        .context("telemetry.ca_file")?;
    let timeout = telemetry.export_timeout;
    // A blocking client owns a runtime of its own, which must not be built
    // (or later dropped) on a thread of another runtime: its own thread.
    std::thread::Builder::new()
        .name("otlp-client".to_owned())
        .spawn(move || {
            reqwest::blocking::Client::builder()
                .tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
                .connect_timeout(timeout)
                .timeout(timeout)
                .redirect(reqwest::redirect::Policy::none())
                .build()
        })
        .context("spawning the OTLP client's builder")?
        .join()
        .map_err(|_| anyhow::anyhow!("building the OTLP HTTP client panicked"))?
        .map_err(|e| anyhow::anyhow!("the OTLP HTTP client: {}", e.without_url()))
}

/// The SDK provider exporting to the configured collector; `None` when
/// traces are off.
fn exporting_provider(
    telemetry: &TelemetryConfig,
    node_id: &str,
) -> anyhow::Result<Option<SdkTracerProvider>> {
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    let Some(url) = telemetry.traces_url() else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(exporter_client(telemetry)?)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(telemetry.export_timeout)
        .build()?;
    let pending = Arc::new(AtomicUsize::new(0));
    let batch = BatchConfigBuilder::default()
        // Never the limit that bites: the count in front of it admits at
        // most `max_queue` spans not yet exported, so its queue (allocated
        // whole, at start) never holds more.
        .with_max_queue_size(telemetry.max_queue)
        .with_max_export_batch_size(512.min(telemetry.max_queue))
        .with_scheduled_delay(std::time::Duration::from_millis(500))
        .build();
    let processor = BatchSpanProcessor::builder(CountingExporter {
        inner: exporter,
        pending: pending.clone(),
    })
    .with_batch_config(batch)
    .build();
    let resource = Resource::builder()
        .with_service_name(telemetry.service_name.clone())
        .with_attributes([
            KeyValue::new("service.instance.id", node_id.to_owned()),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        ])
        .build();
    Ok(Some(
        SdkTracerProvider::builder()
            .with_span_processor(BoundedProcessor {
                inner: processor,
                pending,
                limit: telemetry.max_queue,
            })
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                telemetry.sample_ratio,
            ))))
            .with_resource(resource)
            .build(),
    ))
}

/// Admits a finished span to the batch processor while fewer than `limit`
/// are waiting for export; drops and counts the rest.
#[derive(Debug)]
struct BoundedProcessor {
    inner: BatchSpanProcessor,
    pending: Arc<AtomicUsize>,
    limit: usize,
}

impl SpanProcessor for BoundedProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.pending.fetch_add(1, Ordering::AcqRel) >= self.limit {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            metrics::counter!(TRACE_SPANS_DROPPED, "reason" => "queue_full").increment(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting what it exported and what it lost.
#[derive(Debug)]
struct CountingExporter<E> {
    inner: E,
    pending: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len();
        let result = self.inner.export(batch).await;
        self.pending.fetch_sub(count, Ordering::AcqRel);
        match &result {
            Ok(()) => metrics::counter!(TRACE_SPANS_EXPORTED).increment(count as u64),
            Err(_) => metrics::counter!(TRACE_SPANS_DROPPED, "reason" => "export_failed")
                .increment(count as u64),
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
