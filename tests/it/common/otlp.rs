//! An OTLP/HTTP trace receiver written in the test: decodes what the
//! daemons export (`POST /v1/traces`, protobuf) with the
//! `opentelemetry-proto` messages, keeps every span, and can be killed
//! (listener closed, open connections shut) mid-run.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{body::Bytes, extract::State, http::StatusCode, routing::post, Router};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest, common::v1::any_value::Value as AnyValue,
};
use prost::Message as _;

/// One span as received.
#[derive(Debug, Clone)]
pub(crate) struct ReceivedSpan {
    /// The span's name (`txmgr.create`, …).
    pub(crate) name: String,
    /// Trace id, 32 hex digits.
    pub(crate) trace_id: String,
    /// Span id, 16 hex digits.
    pub(crate) span_id: String,
    /// Parent span id, empty for a root.
    pub(crate) parent_span_id: String,
    /// Start time, nanoseconds since the Unix epoch.
    pub(crate) start_unix_nano: u64,
    /// The resource's `service.instance.id`: the node that recorded it.
    pub(crate) node: String,
    /// The span's attributes, as strings.
    pub(crate) attributes: HashMap<String, String>,
}

/// A running receiver.
pub(crate) struct OtlpReceiver {
    /// `http://127.0.0.1:<port>`: the daemons' `otlp_endpoint`.
    pub(crate) endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    /// Listens on a free port.
    pub(crate) async fn start() -> OtlpReceiver {
        let spans: Arc<Mutex<Vec<ReceivedSpan>>> = Arc::default();
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind OTLP receiver");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("OTLP receiver serves");
        });
        OtlpReceiver {
            endpoint,
            spans,
            stop: Some(stop),
            task,
        }
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("not poisoned").clone()
    }

    /// The spans of one trace.
    pub(crate) fn trace(&self, trace_id: &str) -> Vec<ReceivedSpan> {
        self.spans()
            .into_iter()
            .filter(|s| s.trace_id == trace_id)
            .collect()
    }

    /// Stops listening and closes its connections: the collector is gone.
    pub(crate) async fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Idle keep-alive connections close at once; an export in flight
        // is answered first.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), &mut self.task).await;
        self.task.abort();
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>, body: Bytes) -> StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let node = resource_spans
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.instance.id")
            .and_then(|kv| kv.value.as_ref())
            .map(|v| text(v.value.as_ref()))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                received.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    start_unix_nano: span.start_time_unix_nano,
                    node: node.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| {
                            let value = kv.value.as_ref().map(|v| text(v.value.as_ref()));
                            (kv.key.clone(), value.unwrap_or_default())
                        })
                        .collect(),
                });
            }
        }
    }
    spans.lock().expect("not poisoned").extend(received);
    StatusCode::OK
}

fn text(value: Option<&AnyValue>) -> String {
    match value {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
