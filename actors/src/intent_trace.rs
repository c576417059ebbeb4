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
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        LazyLock, OnceLock,
    },
    time::{Instant, SystemTime},
};

use dashmap::DashMap;
use opentelemetry::{
    global::BoxedTracer,
    trace::{
        Span, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
        TraceState, Tracer,
    },
    Context, KeyValue,
};
use sqlx::PgPool;
use uuid::Uuid;

/// The instrumentation scope of every span the engine records.
pub const SCOPE: &str = "txmgr";

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
}

/// A stored W3C trace context: `00-<trace id>-<parent span id>-<flags>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: TraceId,
    span_id: SpanId,
    sampled: bool,
}

impl TraceParent {
    /// Parses a `traceparent` (version 00; the W3C rules: lower-case hex,
    /// neither id all zeros). `None` for anything else.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let lower_hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if parts.next().is_some()
            || version != "00"
            || !lower_hex(trace, 32)
            || !lower_hex(span, 16)
            || !lower_hex(flags, 2)
        {
            return None;
        }
        let trace_id = TraceId::from_hex(trace).ok()?;
        let span_id = SpanId::from_hex(span).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        (trace_id != TraceId::INVALID && span_id != SpanId::INVALID).then_some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The context of a span (the create's), when it is valid.
    pub fn of(context: &SpanContext) -> Option<TraceParent> {
        context.is_valid().then(|| TraceParent {
            trace_id: context.trace_id(),
            span_id: context.span_id(),
            sampled: context.is_sampled(),
        })
    }

    /// The trace id, 32 lower-case hex digits.
    pub fn trace_id(&self) -> String {
        self.trace_id.to_string()
    }

    /// Whether the trace is recorded (the sampling decision of its root).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// The `traceparent` header value.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }

    /// The context to continue from, as a remote parent.
    pub fn context(&self) -> Context {
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        Context::new().with_remote_span_context(SpanContext::new(
            self.trace_id,
            self.span_id,
            flags,
            true,
            TraceState::default(),
        ))
    }
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
    if !enabled() || !parent.sampled {
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

/// The stored contexts of `tx_ids` that are sampled: from memory, the rest
/// from the database in one read. Empty while traces are off; a failed read
/// costs spans, never the caller's work.
pub async fn parents(pool: &PgPool, tx_ids: &[Uuid]) -> HashMap<Uuid, TraceParent> {
    let mut found = HashMap::new();
    if !enabled() || tx_ids.is_empty() {
        return found;
    }
    let mut missing = Vec::new();
    for tx_id in tx_ids {
        match REMEMBERED.get(tx_id) {
            Some(entry) => {
                found.insert(*tx_id, entry.0);
            }
            None => missing.push(*tx_id),
        }
    }
    if missing.is_empty() {
        return found;
    }
    match crate::store::trace_context::load(pool, &missing).await {
        Ok(rows) => {
            for (tx_id, text) in rows {
                if let Some(parent) = TraceParent::parse(&text) {
                    remember(tx_id, parent);
                    found.insert(tx_id, parent);
                }
            }
        }
        Err(err) => {
            tracing::debug!(target: "txmgr::trace", error = %err, "trace contexts not read; spans skipped");
        }
    }
    found
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
    if !enabled() || !parent.sampled {
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
    if !enabled() || !parent.sampled {
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

/// Records one endpoint's answer to a broadcast.
pub fn record_send(
    parent: &TraceParent,
    chain: &str,
    endpoint: &str,
    started: SystemTime,
    result: &Result<alloy::primitives::B256, crate::chain::ChainError>,
) {
    let outcome = match result {
        Ok(_) => "accepted",
        Err(crate::chain::ChainError::Rpc { .. }) => "refused",
        Err(_) => "unavailable",
    };
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
        result.as_ref().err().map(|e| e.to_string()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_round_trips_and_malformed_ones_are_refused() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(text).expect("valid");
        assert_eq!(parsed.header(), text);
        assert!(parsed.sampled());
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let unsampled =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
                .expect("valid");
        assert!(!unsampled.sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn nothing_is_looked_up_while_traces_are_off() {
        // A pool that never connects: a read would fail, not hang.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("lazy pool");
        assert!(parents(&pool, &[Uuid::now_v7()]).await.is_empty());
        assert_eq!(broadcast_parent(), None);
    }
}
