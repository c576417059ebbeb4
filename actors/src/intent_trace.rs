//! One OpenTelemetry trace per intent, across nodes.
//!
//! The create stores its span's W3C `traceparent` with the intent
//! (`managed_tx.trace_context`, only when sampled); every later step —
//! allocation, signing, each broadcast, receipt, finality, each webhook
//! delivery — records a span whose parent is that stored context, on
//! whichever node does the work. Pipeline work is batched (one group commit
//! allocates many intents), so these spans are recorded after the fact with
//! their measured start and end, each with its own intent's parent.
//!
//! Off by default: until the daemon calls [`enable`] (it has installed the
//! SDK with an OTLP exporter), nothing here looks anything up or builds a
//! span, and no create stores a context — the pipeline pays nothing.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        LazyLock, OnceLock,
    },
    time::{Instant, SystemTime},
};

use dashmap::DashMap;
use opentelemetry::{
    global::BoxedTracer,
    trace::{Span, SpanKind, Status, Tracer},
    KeyValue,
};
use uuid::Uuid;

pub use crate::domain::TraceParent;

/// The instrumentation scope of every span the engine records.
pub const SCOPE: &str = "txmgr";

/// The `tracing` target whose spans the daemon exports (and only those):
/// the HTTP create and its durable insert. Here, below both the HTTP edge
/// that records them and the daemon that installs the exporter.
pub const OTEL_TARGET: &str = "txmgr::otel";

/// How long a context stays in this node's memory after it was last
/// stored; older ones are read from the database again when needed.
const REMEMBER_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Most contexts kept in memory; above it the oldest are forgotten.
const MAX_REMEMBERED: usize = 200_000;

static ENABLED: AtomicBool = AtomicBool::new(false);
static TRACER: OnceLock<BoxedTracer> = OnceLock::new();
static REMEMBERED: LazyLock<DashMap<Uuid, (TraceParent, Instant)>> = LazyLock::new(DashMap::new);
static INSERTS: AtomicUsize = AtomicUsize::new(0);

tokio::task_local! {
    /// The intent whose attempt the current task broadcasts: each
    /// endpoint's answer becomes a span under it.
    static BROADCASTING: TraceParent;
    /// The intents of the JSON-RPC batch the current task broadcasts, in
    /// the batch's order (`None`: that call's intent is not traced): each
    /// endpoint's answer to each call becomes a span under its intent.
    static BROADCASTING_BATCH: std::sync::Arc<[Option<TraceParent>]>;
}

/// Turns intent traces on; the daemon calls it once the global tracer
/// provider is installed.
pub fn enable() {
    let _ = TRACER.set(opentelemetry::global::tracer(SCOPE));
    ENABLED.store(true, Ordering::Release);
}

/// Whether intent traces are on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// Keeps an intent's context in memory (the create's node, a leader that
/// read it), so the steps that follow on this node need no read.
pub fn remember(tx_id: Uuid, parent: TraceParent) {
    if !enabled() || !parent.sampled() {
        return;
    }
    REMEMBERED.insert(tx_id, (parent, Instant::now()));
    if INSERTS.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
        forget_old();
    }
}

fn forget_old() {
    let now = Instant::now();
    REMEMBERED.retain(|_, (_, at)| now.duration_since(*at) < REMEMBER_FOR);
    if REMEMBERED.len() > MAX_REMEMBERED {
        REMEMBERED.clear();
    }
}

/// The context kept in this node's memory for `tx_id`, if any (read
/// through `store::trace_context::parents`, which loads the rest).
pub fn remembered(tx_id: &Uuid) -> Option<TraceParent> {
    REMEMBERED.get(tx_id).map(|entry| entry.0)
}

/// Records a finished step of an intent under its stored parent.
pub fn record(
    name: &'static str,
    parent: &TraceParent,
    started: SystemTime,
    ended: SystemTime,
    attributes: Vec<KeyValue>,
    error: Option<String>,
) {
    let Some(mut span) = start(name, parent, started, attributes) else {
        return;
    };
    if let Some(error) = error {
        span.set_status(Status::error(error));
    }
    span.end_with_timestamp(ended.max(started));
}

/// A step in progress: [`SpanInFlight::header`] is the `traceparent` to
/// send on, [`SpanInFlight::end`] closes it.
pub struct SpanInFlight {
    span: opentelemetry::global::BoxedSpan,
}

impl std::fmt::Debug for SpanInFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanInFlight").finish_non_exhaustive()
    }
}

impl SpanInFlight {
    /// The `traceparent` naming this span as the parent of what the
    /// request causes (the webhook receiver's own spans).
    pub fn header(&self) -> Option<String> {
        TraceParent::of(self.span.span_context()).map(|p| p.header())
    }

    /// Ends the span now, as an error when `error` is given.
    pub fn end(mut self, attributes: Vec<KeyValue>, error: Option<String>) {
        self.span.set_attributes(attributes);
        if let Some(error) = error {
            self.span.set_status(Status::error(error));
        }
        self.span.end();
    }
}

/// Starts a client span under `parent` (the caller sends its
/// [`SpanInFlight::header`]); `None` while traces are off or not sampled.
pub fn begin_client(
    name: &'static str,
    parent: &TraceParent,
    attributes: Vec<KeyValue>,
) -> Option<SpanInFlight> {
    let tracer = TRACER.get()?;
    if !enabled() || !parent.sampled() {
        return None;
    }
    let span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(tracer, &parent.context());
    Some(SpanInFlight { span })
}

fn start(
    name: &'static str,
    parent: &TraceParent,
    started: SystemTime,
    attributes: Vec<KeyValue>,
) -> Option<opentelemetry::global::BoxedSpan> {
    let tracer = TRACER.get()?;
    if !enabled() || !parent.sampled() {
        return None;
    }
    Some(
        tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(started)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent.context()),
    )
}

/// Runs `send` with `parent` as the intent being broadcast: the endpoint
/// set records one `txmgr.broadcast` span per endpoint that answers.
pub async fn broadcasting<F: std::future::Future>(
    parent: Option<TraceParent>,
    send: F,
) -> F::Output {
    match parent {
        Some(parent) => BROADCASTING.scope(parent, send).await,
        None => send.await,
    }
}

/// The intent the current task broadcasts, if it is traced.
pub fn broadcast_parent() -> Option<TraceParent> {
    BROADCASTING.try_with(|p| *p).ok()
}

/// Runs `send`, a JSON-RPC batch of sends, with `parents` as its calls'
/// intents in order: the endpoint set records one `txmgr.broadcast` span
/// per call and endpoint that answers, as for single sends. Without any
/// traced intent nothing is scoped.
pub async fn broadcasting_batch<F: std::future::Future>(
    parents: Vec<Option<TraceParent>>,
    send: F,
) -> F::Output {
    if parents.iter().all(Option::is_none) {
        return send.await;
    }
    BROADCASTING_BATCH.scope(parents.into(), send).await
}

/// The intents of the batch the current task broadcasts, if any is traced.
pub fn batch_parents() -> Option<std::sync::Arc<[Option<TraceParent>]>> {
    BROADCASTING_BATCH.try_with(std::sync::Arc::clone).ok()
}

/// Records one endpoint's answer to a broadcast: `outcome` is
/// `accepted`, `refused` or `unavailable` (the chain port's classes), and
/// `error` the answer's text when it was not accepted.
pub fn record_send(
    parent: &TraceParent,
    chain: &str,
    endpoint: &str,
    started: SystemTime,
    outcome: &'static str,
    error: Option<String>,
) {
    record(
        "txmgr.broadcast",
        parent,
        started,
        SystemTime::now(),
        vec![
            KeyValue::new("txmgr.chain", chain.to_owned()),
            KeyValue::new("txmgr.endpoint", endpoint.to_owned()),
            KeyValue::new("txmgr.outcome", outcome),
        ],
        error,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_remembered_while_traces_are_off() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tx_id = Uuid::now_v7();
        remember(tx_id, TraceParent::parse(text).expect("valid"));
        assert_eq!(remembered(&tx_id), None);
        assert_eq!(broadcast_parent(), None);
    }
}
