//! Every refused create is counted (README "Operations", metric
//! `txmgr_creates_total`), including those answered before the handler
//! runs: the API's concurrency limit (503 `busy`), the request timeout
//! (503 `unavailable`) and the body limit (413 `payload_too_large`). On a
//! real `txmgr run` process scraped over HTTP, so no other test's samples
//! share its recorder.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    Anvil,
};

/// The value of the sample of `name` whose labels include every pair of
/// `labels`, in a Prometheus text exposition.
fn sample(exposition: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.split_once("} ")?;
        labels
            .iter()
            .all(|(k, v)| set.split(',').any(|pair| pair == format!("{k}=\"{v}\"")))
            .then(|| value.trim().parse().ok())?
    })
}

/// A create whose body never arrives: it holds the node's one API place
/// until the request timeout answers it. Returns the open connection.
async fn stalled_create(port: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let head = format!(
        "POST /v1/transactions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{\"submitter\""
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream
}

/// Reads what the server answers on `stream` until it closes it (or
/// 20 s pass).
async fn answer_of(mut stream: TcpStream) -> String {
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut bytes)).await;
    assert!(read.is_ok(), "no answer within 20 s: {bytes:?}");
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Counts one answer under its `result` label: `created` (202), `replayed`
/// (200) or its error code.
fn tally(seen: &mut BTreeMap<String, u32>, status: u16, code: &str) {
    let result = match status {
        202 => "created",
        200 => "replayed",
        _ => code,
    };
    *seen.entry(result.to_owned()).or_default() += 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_refused_before_the_handler_are_counted_with_their_code() {
    let spec = ClusterSpec {
        nodes: vec![],
        submitters: vec![0],
        strict: vec![],
        node_extra: "",
        confirmations: 1,
    };
    let mut cluster = Cluster::start(spec, Anvil::start().await, None).await;
    // One API request at a time, answered within 2 s.
    cluster
        .add_node_with("refusals", |config| {
            config.replace(
                "[http]\n",
                "[http]\nmax_concurrent_requests = 1\nmax_long_polls = 1\nrequest_timeout = \"2s\"\n",
            )
        })
        .await;
    let daemon = &cluster.daemons[0];
    let base = daemon.base();
    // No pooled connections: the server closes one it refused a body on
    // (413) without reading it, and a request sent on it would fail.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let submitter = cluster.submitters[0].clone();
    // Every answer the test sees, by the `result` label it must be counted
    // under.
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();

    // 1. A stalled create holds the one place, so a create beside it is
    // shed (503 busy), and the stalled one is answered by the request
    // timeout (503 unavailable). Under load the stalled one may itself meet
    // a create in flight and be shed instead: then the round is repeated.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "no round with both refusals: {seen:?}"
        );
        let stalled = stalled_create(daemon.port).await;
        let window = Instant::now() + Duration::from_millis(1500);
        let mut shed = false;
        while !shed && Instant::now() < window {
            let body = json!({"submitter": submitter, "to": SINK, "value": "1",
                "request_id": "shed"});
            let response = client
                .post(format!("{base}/v1/transactions"))
                .json(&body)
                .send()
                .await
                .expect("create answered");
            let status = response.status().as_u16();
            let answer: Value = response.json().await.unwrap_or_default();
            let code = answer["error"]["code"].as_str().unwrap_or_default();
            tally(&mut seen, status, code);
            shed = status == 503 && code == "busy";
        }
        let answer = answer_of(stalled).await;
        let code = ["unavailable", "busy"]
            .into_iter()
            .find(|code| answer.contains(&format!("\"code\":\"{code}\"")))
            .unwrap_or_else(|| panic!("the stalled create answered {answer}"));
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        tally(&mut seen, 503, code);
        if shed && code == "unavailable" {
            break;
        }
    }
    // 2. A body over http.body_limit_bytes, refused by its Content-Length.
    let oversized = client
        .post(format!("{base}/v1/transactions"))
        .header("content-type", "application/json")
        .body(vec![b' '; 300 * 1024])
        .send()
        .await
        .expect("answered");
    assert_eq!(oversized.status().as_u16(), 413);
    tally(&mut seen, 413, "payload_too_large");

    // Counted before the answer leaves, so one scrape sees every answer.
    let exposition = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("exposition");
    for (result, times) in &seen {
        // Refused before a chain was read: `none`; the handler's: the chain.
        let chain = if matches!(result.as_str(), "created" | "replayed") {
            "default"
        } else {
            "none"
        };
        let labels = [("chain", chain), ("result", result.as_str())];
        assert_eq!(
            sample(&exposition, "txmgr_creates_total", &labels),
            Some(f64::from(*times)),
            "{times} `{result}` answers counted:\n{exposition}"
        );
        assert_eq!(
            sample(&exposition, "txmgr_create_ack_seconds_count", &labels),
            Some(f64::from(*times)),
            "{times} `{result}` answers timed:\n{exposition}"
        );
    }
    for refusal in ["busy", "unavailable", "payload_too_large"] {
        assert!(seen.contains_key(refusal), "{seen:?}");
    }
}
