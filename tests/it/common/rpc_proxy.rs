//! A fault-injecting HTTP JSON-RPC proxy between txmgr nodes and anvil.
//!
//! The proxy speaks a minimal HTTP/1.1 itself (keep-alive, `Content-Length`
//! or chunked request bodies) on raw tokio sockets, so its faults are real at
//! the transport level: a "reset" closes the TCP connection with `SO_LINGER`
//! 0 (an RST) after reading the request and before writing a single response
//! byte, and the client's HTTP call fails with a connection error rather than
//! an HTTP status. Everything else is forwarded byte for byte (JSON-RPC
//! batches included) to the upstream, whose status and body come back
//! unchanged. The send faults see a batch's calls: each raw transaction is
//! recorded, and a refusal or a swallowing backend answers every call of a
//! batch; `refuse_batches` answers any batch with HTTP 400.
//!
//! Fault decisions come from a seeded [`StdRng`]; every request draws the
//! same number of random values whatever the rates, so a given request order
//! yields the same fault sequence.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use faults::{Counters, Plan};
pub(crate) use faults::{Faults, ProxyCounts};
use http1::{read_request, write_response, Request};

mod faults;
mod http1;

/// The JSON-RPC method [`Faults::send_drop_rate`] applies to.
const SEND_RAW_METHOD: &str = "eth_sendRawTransaction";

/// Bound on one upstream call, so a wedged upstream cannot wedge the proxy.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

/// State shared by the accept loop and every connection task.
struct Shared {
    upstream: String,
    client: reqwest::Client,
    /// Current faults and the RNG, under one lock so one request's draws are
    /// contiguous in the random sequence.
    dice: Mutex<(Faults, StdRng)>,
    counters: Counters,
    /// The raw transactions (`0x…` hex) of every `eth_sendRawTransaction`
    /// received, whatever happened to it next.
    sent_raw: Mutex<Vec<String>>,
}

impl Shared {
    fn faults(&self) -> Faults {
        self.dice.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    fn plan(&self) -> Plan {
        let mut dice = self.dice.lock().unwrap_or_else(|e| e.into_inner());
        let (faults, rng) = &mut *dice;
        Plan::draw(faults, rng)
    }
}

/// A running proxy on a loopback port; the server (and every open
/// connection) stops when dropped.
pub(crate) struct RpcProxy {
    port: u16,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl RpcProxy {
    /// Starts a proxy on `127.0.0.1:0` forwarding to `upstream_url`, with no
    /// faults and fault dice seeded by `seed`.
    pub(crate) async fn start(upstream_url: &str, seed: u64) -> RpcProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the RPC proxy on loopback");
        let port = listener.local_addr().expect("proxy local address").port();
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(UPSTREAM_TIMEOUT)
            .build()
            .expect("building the proxy's upstream client");
        let shared = Arc::new(Shared {
            upstream: upstream_url.to_owned(),
            client,
            dice: Mutex::new((Faults::default(), StdRng::seed_from_u64(seed))),
            counters: Counters::default(),
            sent_raw: Mutex::new(Vec::new()),
        });
        let server = tokio::spawn(serve(listener, shared.clone()));
        RpcProxy {
            port,
            shared,
            server,
        }
    }

    /// The proxy's HTTP endpoint, to hand to a node instead of the upstream.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Replaces the faults; takes effect for requests read from now on.
    pub(crate) fn set(&self, faults: Faults) {
        let mut dice = self.shared.dice.lock().unwrap_or_else(|e| e.into_inner());
        dice.0 = faults;
    }

    /// What the proxy did so far.
    pub(crate) fn counts(&self) -> ProxyCounts {
        self.shared.counters.snapshot()
    }

    /// The raw transactions (lower-case `0x` hex) of every
    /// `eth_sendRawTransaction` this proxy received.
    pub(crate) fn sent_raw(&self) -> Vec<String> {
        self.shared
            .sent_raw
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for RpcProxy {
    fn drop(&mut self) {
        // Dropping the accept task drops its JoinSet, aborting connections.
        self.server.abort();
    }
}

/// Accept loop; owns every connection task.
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(connection(stream, shared.clone()));
                }
                // E.g. EMFILE under load: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow forever.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one keep-alive connection until the client closes it, a fault
/// resets it, or it breaks.
async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let mut conn = BufReader::new(stream);
    loop {
        let request = match read_request(&mut conn).await {
            Ok(Some(request)) => request,
            // Clean close between requests, or garbage: end the connection.
            Ok(None) | Err(_) => return,
        };
        Counters::bump(&shared.counters.requests);
        let plan = shared.plan();
        if let Some(stall) = shared.faults().stall {
            Counters::bump(&shared.counters.delayed);
            tokio::time::sleep(stall).await;
        }

        if let Some(delay) = plan.delay {
            Counters::bump(&shared.counters.delayed);
            tokio::time::sleep(delay).await;
        }
        if plan.reset {
            Counters::bump(&shared.counters.resets);
            return reset(conn);
        }
        if let Some(status) = plan.error {
            Counters::bump(&shared.counters.errors);
            let body = format!("injected fault: HTTP {status}");
            let ok = write_response(
                &mut conn,
                status,
                Some("text/plain"),
                body.as_bytes(),
                request.close,
            )
            .await;
            if !ok || request.close {
                return;
            }
            continue;
        }

        let faults = shared.faults();
        let (batch, is_batch) = calls(&request.body);
        if faults.refuse_batches && is_batch {
            Counters::bump(&shared.counters.refused_batches);
            let body = b"batch requests are not supported";
            let ok = write_response(&mut conn, 400, Some("text/plain"), body, request.close).await;
            if !ok || request.close {
                return;
            }
            continue;
        }
        let is_send = batch
            .iter()
            .any(|call| call.get("method").and_then(|m| m.as_str()) == Some(SEND_RAW_METHOD));
        if is_send {
            Counters::bump(&shared.counters.send_requests);
            if is_batch && batch.len() > 1 {
                Counters::bump(&shared.counters.send_batches);
            }
            let mut sent = shared.sent_raw.lock().unwrap_or_else(|e| e.into_inner());
            for call in &batch {
                if let Some(raw) = call["params"][0].as_str() {
                    sent.push(raw.to_lowercase());
                }
            }
        }
        if let (true, Some(delay)) = (is_send, faults.send_delay) {
            Counters::bump(&shared.counters.delayed);
            tokio::time::sleep(delay).await;
        }
        if let (true, Some(message)) = (is_send, faults.refuse_sends) {
            if faults.forward_refused_sends {
                Counters::bump(&shared.counters.forwarded);
                let _ = forward(&shared, &request).await;
            }
            // Every call refused, a batch's each with its own id.
            let refuse = |call: &serde_json::Value| {
                let id = call.get("id").cloned().unwrap_or(serde_json::Value::Null);
                serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32000, "message": message}})
            };
            let answer = if is_batch {
                serde_json::Value::Array(batch.iter().map(refuse).collect())
            } else {
                refuse(batch.first().unwrap_or(&serde_json::Value::Null))
            };
            let ok = write_response(
                &mut conn,
                200,
                Some("application/json"),
                answer.to_string().as_bytes(),
                request.close,
            )
            .await;
            if !ok || request.close {
                return;
            }
            continue;
        }
        if let Some(answer) = scripted_answer(&batch, is_batch, &faults) {
            let ok = write_response(
                &mut conn,
                200,
                Some("application/json"),
                answer.as_bytes(),
                request.close,
            )
            .await;
            if !ok || request.close {
                return;
            }
            continue;
        }
        Counters::bump(&shared.counters.forwarded);
        let answer = forward(&shared, &request).await;
        if is_send && plan.send_drop {
            Counters::bump(&shared.counters.dropped_sends);
            return reset(conn);
        }
        if plan.drop_after_forward {
            Counters::bump(&shared.counters.dropped_after_forward);
            return reset(conn);
        }
        let ok = match answer {
            Ok((status, content_type, body)) => {
                write_response(
                    &mut conn,
                    status,
                    content_type.as_deref(),
                    &body,
                    request.close,
                )
                .await
            }
            // The upstream itself failed: answer like a real gateway.
            Err(e) => {
                let body = format!("upstream error: {e}");
                write_response(
                    &mut conn,
                    502,
                    Some("text/plain"),
                    body.as_bytes(),
                    request.close,
                )
                .await
            }
        };
        if !ok || request.close {
            return;
        }
    }
}

/// Aborts the connection with an RST, so the client's pending call fails
/// at the transport level.
fn reset(conn: BufReader<TcpStream>) {
    let stream = conn.into_inner();
    // Without zero linger the close is a FIN, which still fails the client's
    // in-flight request ("connection closed before message completed").
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Sends the request body unchanged to the upstream; returns its status,
/// content type and body.
async fn forward(
    shared: &Shared,
    request: &Request,
) -> Result<(u16, Option<String>, Vec<u8>), reqwest::Error> {
    let method =
        reqwest::Method::from_bytes(request.method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let response = shared
        .client
        .request(method, &shared.upstream)
        .header(
            reqwest::header::CONTENT_TYPE,
            request
                .content_type
                .clone()
                .unwrap_or_else(|| "application/json".to_owned()),
        )
        .body(request.body.clone())
        .send()
        .await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.bytes().await?.to_vec();
    Ok((status, content_type, body))
}

/// The calls of a JSON-RPC body (one, or a batch's; none when it is not
/// JSON), and whether it is a batch.
fn calls(body: &[u8]) -> (Vec<serde_json::Value>, bool) {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(batch)) => (batch, true),
        Ok(call) => (vec![call], false),
        Err(_) => (Vec::new(), false),
    }
}

/// The answer a lying backend gives instead of forwarding: a swallowed send
/// (its hash, as if accepted) or a frozen head. A batch is answered so only
/// when every one of its calls is.
fn scripted_answer(calls: &[serde_json::Value], is_batch: bool, faults: &Faults) -> Option<String> {
    if !is_batch {
        return scripted_call(calls.first()?, faults).map(|answer| answer.to_string());
    }
    let answers: Option<Vec<serde_json::Value>> = calls
        .iter()
        .map(|call| scripted_call(call, faults))
        .collect();
    Some(serde_json::Value::Array(answers?).to_string())
}

/// [`scripted_answer`] of one call.
fn scripted_call(call: &serde_json::Value, faults: &Faults) -> Option<serde_json::Value> {
    let id = call.get("id").cloned().unwrap_or(serde_json::Value::Null);
    let result = match call.get("method").and_then(|m| m.as_str())? {
        SEND_RAW_METHOD if faults.swallow_sends => {
            let raw = call.get("params")?.get(0)?.as_str()?;
            let bytes = hex::decode(raw.trim_start_matches("0x")).ok()?;
            format!("{}", alloy::primitives::keccak256(bytes))
        }
        "eth_blockNumber" => format!("0x{:x}", faults.frozen_head?),
        _ => return None,
    };
    Some(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
}
