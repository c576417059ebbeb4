//! The create's span (`txmgr.create`, a server span) and its durable
//! insert (`txmgr.store.insert`): the first spans of an intent's trace. An
//! incoming W3C `traceparent` is the parent; the create span's own context
//! is stored with the intent for the steps that follow on any node.

use axum::http::HeaderMap;
use opentelemetry::trace::{Status, TraceContextExt as _};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use txmgr_actors::intent_trace::{self, TraceParent, OTEL_TARGET};
use uuid::Uuid;

/// The header of the caller's trace context.
const TRACEPARENT: &str = "traceparent";

/// One create's spans; inert while traces are off.
#[derive(Debug)]
pub(crate) struct CreateTrace {
    span: Span,
}

impl CreateTrace {
    /// Starts the create span, under the request's `traceparent` when it
    /// carries a valid one (an invalid one starts a new trace).
    pub(crate) fn start(headers: &HeaderMap) -> CreateTrace {
        if !intent_trace::enabled() {
            return CreateTrace { span: Span::none() };
        }
        let span = tracing::info_span!(target: OTEL_TARGET, "txmgr.create",
            otel.kind = "server", http.request.method = "POST", http.route = "/v1/transactions");
        let parent = headers
            .get(TRACEPARENT)
            .and_then(|value| value.to_str().ok())
            .and_then(TraceParent::parse);
        if let Some(parent) = parent {
            // Only fails without the OpenTelemetry layer, i.e. traces off.
            let _ = span.set_parent(parent.context());
        }
        CreateTrace { span }
    }

    /// The create span, to run the request in.
    pub(crate) fn span(&self) -> Span {
        self.span.clone()
    }

    /// The durable insert's span, a child of the create's.
    pub(crate) fn insert_span(&self) -> Span {
        if self.span.is_none() {
            return Span::none();
        }
        tracing::info_span!(target: OTEL_TARGET, parent: &self.span, "txmgr.store.insert")
    }

    /// The context the intent stores: the create span's, when sampled.
    pub(crate) fn stored(&self) -> Option<TraceParent> {
        if self.span.is_none() {
            return None;
        }
        let context = self.span.context();
        TraceParent::of(context.span().span_context()).filter(TraceParent::sampled)
    }

    /// Books the answer: the new intent's id (kept in this node's memory
    /// for its next steps), or the error code.
    pub(crate) fn finish(&self, created: Option<Uuid>, error: Option<&str>) {
        if self.span.is_none() {
            return;
        }
        if let Some(tx_id) = created {
            self.span.set_attribute("txmgr.tx_id", tx_id.to_string());
            if let Some(parent) = self.stored() {
                intent_trace::remember(tx_id, parent);
            }
        }
        if let Some(code) = error {
            self.span.set_status(Status::error(code.to_owned()));
        }
    }
}
