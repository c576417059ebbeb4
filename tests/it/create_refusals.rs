//! Every refused create is counted (README "Operations", metric
//! `txmgr_creates_total`), including those answered before the handler
//! runs: the API's concurrency limit (503 `busy`), the request timeout
//! (503 `unavailable`) and the body limit (413 `payload_too_large`). On a
//! real `txmgr run` process scraped over HTTP, so no other test's samples
//! share its recorder.

use std::time::Duration;

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::common::{
    cluster::{Cluster, ClusterSpec, SINK},
    eventually, Anvil,
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
    let (base, client) = (daemon.base(), cluster.client.clone());
    let submitter = cluster.submitters[0].clone();
    let create = |request_id: &'static str| {
        let (client, base, submitter) = (client.clone(), base.clone(), submitter.clone());
        async move {
            let body = json!({"submitter": submitter, "to": SINK, "value": "1",
                "request_id": request_id});
            let response = client
                .post(format!("{base}/v1/transactions"))
                .json(&body)
                .send()
                .await
                .expect("create answered");
            let status = response.status().as_u16();
            (
                status,
                response
                    .json::<serde_json::Value>()
                    .await
                    .unwrap_or_default(),
            )
        }
    };

    // 1. The stalled create holds the one place: the next create is shed.
    let stalled = stalled_create(daemon.port).await;
    let shed = eventually(Duration::from_secs(10), Duration::from_millis(20), || {
        let attempt = create("shed");
        async move { Some(attempt.await).filter(|(status, _)| *status == 503) }
    })
    .await;
    assert_eq!(shed.1["error"]["code"], "busy", "{}", shed.1);
    // 2. The stalled one is answered by the request timeout.
    let timed_out = answer_of(stalled).await;
    assert!(
        timed_out.starts_with("HTTP/1.1 503") && timed_out.contains("\"unavailable\""),
        "{timed_out}"
    );
    // 3. A body over http.body_limit_bytes, refused by its Content-Length.
    let oversized = client
        .post(format!("{base}/v1/transactions"))
        .header("content-type", "application/json")
        .body(vec![b' '; 300 * 1024])
        .send()
        .await
        .expect("answered");
    assert_eq!(oversized.status().as_u16(), 413);

    // Counted before the answer leaves, so one scrape sees all three.
    let exposition = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("exposition");
    for (code, status) in [
        ("busy", 503),
        ("unavailable", 503),
        ("payload_too_large", 413),
    ] {
        let labels = [("chain", "none"), ("result", code)];
        assert_eq!(
            sample(&exposition, "txmgr_creates_total", &labels),
            Some(1.0),
            "one {status} `{code}` create counted:\n{exposition}"
        );
        assert_eq!(
            sample(&exposition, "txmgr_create_ack_seconds_count", &labels),
            Some(1.0),
            "one {status} `{code}` create timed:\n{exposition}"
        );
    }
}
