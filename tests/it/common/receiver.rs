//! A webhook receiver written in the test: records every request (headers
//! and body) and answers by a programmable policy.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use serde_json::Value;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    /// `X-Txmgr-Delivery`.
    pub(crate) delivery_id: String,
    /// `X-Txmgr-Attempt`.
    pub(crate) attempt: u32,
    /// `X-Txmgr-Signature`.
    pub(crate) signature: String,
    /// The raw body.
    pub(crate) body: Vec<u8>,
    /// The body as JSON.
    pub(crate) json: Value,
    /// What the receiver answered.
    pub(crate) status: u16,
    /// `traceparent` (W3C), empty when the request had none.
    pub(crate) traceparent: String,
}

/// How the receiver answers the n-th request (0-based).
pub(crate) type Policy = Box<dyn Fn(usize) -> (u16, Option<u64>) + Send + Sync>;

#[derive(Clone)]
struct Shared {
    received: Arc<Mutex<Vec<Received>>>,
    policy: Arc<Mutex<Policy>>,
    /// Time taken before answering (a slow receiver).
    delay_ms: Arc<std::sync::atomic::AtomicU64>,
    /// Events of this submitter are answered 503 with this Retry-After,
    /// whatever the policy says.
    refused_submitter: Arc<Mutex<Option<(String, u64)>>>,
}

/// A running receiver.
pub(crate) struct Receiver {
    /// `http://127.0.0.1:<port>/hook`.
    pub(crate) url: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver answering by `policy`: (status, Retry-After seconds).
    pub(crate) async fn start(policy: Policy) -> Receiver {
        let shared = Shared {
            received: Arc::default(),
            policy: Arc::new(Mutex::new(policy)),
            delay_ms: Arc::default(),
            refused_submitter: Arc::default(),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("receiver serves");
        });
        Receiver { url, shared, task }
    }

    /// Answers 200 to everything.
    pub(crate) async fn always_ok() -> Receiver {
        Self::start(Box::new(|_| (200, None))).await
    }

    /// Changes how later requests are answered.
    pub(crate) fn set_policy(&self, policy: Policy) {
        *self.shared.policy.lock().expect("not poisoned") = policy;
    }

    /// Makes every later answer take `delay` (requests are recorded on arrival).
    pub(crate) fn set_delay(&self, delay: std::time::Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.shared
            .delay_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Answers every later event of `submitter` 503 with `Retry-After:
    /// retry_after` (the others by the policy).
    pub(crate) fn refuse_submitter(&self, submitter: &str, retry_after: u64) {
        *self.shared.refused_submitter.lock().expect("not poisoned") =
            Some((submitter.to_owned(), retry_after));
    }

    /// Every request so far, in arrival order.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("not poisoned").clone()
    }

    /// The requests for `webhook` answered 2xx, in arrival order.
    pub(crate) fn delivered_for(&self, webhook: &str) -> Vec<Received> {
        self.delivered()
            .into_iter()
            .filter(|r| r.json["webhook"] == webhook)
            .collect()
    }

    /// The requests answered 2xx, in arrival order.
    pub(crate) fn delivered(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| (200..300).contains(&r.status))
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (status, retry_after) = {
        let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut received = shared.received.lock().expect("not poisoned");
        let refused = shared
            .refused_submitter
            .lock()
            .expect("not poisoned")
            .clone()
            .filter(|(submitter, _)| json["submitter"] == submitter.as_str());
        let (status, retry_after) = match refused {
            Some((_, retry_after)) => (503, Some(retry_after)),
            None => (shared.policy.lock().expect("not poisoned"))(received.len()),
        };
        received.push(Received {
            delivery_id: header("x-txmgr-delivery"),
            attempt: header("x-txmgr-attempt").parse().unwrap_or(0),
            signature: header("x-txmgr-signature"),
            json,
            body: body.to_vec(),
            status,
            traceparent: header("traceparent"),
        });
        (status, retry_after)
    };
    let delay = shared.delay_ms.load(std::sync::atomic::Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    let status = StatusCode::from_u16(status).expect("policy status");
    match retry_after {
        Some(seconds) => (status, [("retry-after", seconds.to_string())]).into_response(),
        None => status.into_response(),
    }
}
