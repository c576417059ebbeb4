//! OpenTelemetry traces across real daemon processes (README "Tracing"):
//! a create on node b with a caller's `traceparent`, led by node a, yields
//! one trace — create and durable insert on b; allocation, signing, the
//! broadcast (endpoint name), receipt and finality on a; the webhook
//! delivery — received and decoded by an OTLP/HTTP collector in the test,
//! and the webhook request carries the same trace. Then the collector is
//! killed mid-burst: every intent still completes, and the lost spans are
//! counted.

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::common::{
    cluster::{Cluster, ClusterSpec},
    load::Acked,
    otlp::{OtlpReceiver, ReceivedSpan},
    receiver::Receiver,
    wait_until, Anvil,
};

const SECRET_VAR: &str = "TXMGR_TRACING_WEBHOOK_SECRET";

/// The caller's trace: its id and the span the create is a child of.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The spans every traced intent has, in pipeline order.
const STEPS: [&str; 8] = [
    "txmgr.create",
    "txmgr.store.insert",
    "txmgr.allocate",
    "txmgr.sign",
    "txmgr.broadcast",
    "txmgr.receipt",
    "txmgr.finality",
    "txmgr.webhook.delivery",
];

fn extra_toml(otlp: &str, hook: &str) -> String {
    format!(
        "\n[telemetry]\notlp_endpoint = \"{otlp}\"\nsample_ratio = 1.0\nexport_timeout = \"2s\"\n\
         \n[[webhooks]]\nname = \"hook\"\nurl = \"{hook}\"\nsecret_env = \"{SECRET_VAR}\"\n\
         events = [\"CONFIRMED\"]\nbackoff_initial = \"100ms\"\nbackoff_max = \"500ms\"\n"
    )
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert!(!found.is_empty(), "no {name} span in {spans:#?}");
    found[0]
}

/// Creates a transfer on the node at `base` (with a `traceparent` when
/// given); returns its id.
async fn create(
    cluster: &Cluster,
    base: &str,
    submitter: &str,
    request_id: &str,
    traceparent: Option<&str>,
) -> Uuid {
    let mut request = cluster.client.post(format!("{base}/v1/transactions"));
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let answer = request
        .json(&json!({
            "submitter": submitter, "request_id": request_id,
            "to": "0x000000000000000000000000000000000000dEaD", "value": "1",
        }))
        .send()
        .await
        .expect("create");
    assert_eq!(answer.status(), 202);
    let created: serde_json::Value = answer.json().await.expect("json");
    created["tx_id"]
        .as_str()
        .expect("tx_id")
        .parse()
        .expect("uuid")
}

/// `txmgr_trace_spans_dropped_total{reason="export_failed"}` of a node.
async fn export_failures(client: &reqwest::Client, base: &str) -> f64 {
    let Ok(answer) = client.get(format!("{base}/metrics")).send().await else {
        return 0.0;
    };
    let text = answer.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("txmgr_trace_spans_dropped_total{reason=\"export_failed\"}"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_trace_follows_an_intent_across_nodes_and_a_dead_collector_costs_no_intent() {
    std::env::set_var(SECRET_VAR, "tracing-secret");
    let mut otlp = OtlpReceiver::start().await;
    let hook = Receiver::always_ok().await;
    let spec = ClusterSpec {
        nodes: vec![],
        submitters: vec![0],
        strict: vec![],
        node_extra: "",
        confirmations: 2,
    };
    let mut cluster = Cluster::start(
        spec,
        Anvil::start_with(&["--block-time", "0.2"]).await,
        None,
    )
    .await;
    let extra = extra_toml(&otlp.endpoint, &hook.url);
    // a alone first: its first intent makes it the submitter's leader
    // (kept while busy and for `idle_release_after`); b joins after.
    let with_extra = |config: String| config + &extra;
    cluster.add_node_with("a", with_extra).await;
    let submitter = cluster.submitters[0].clone();
    let a = cluster.node_ref("a").base();
    let warm_up = create(&cluster, &a, &submitter, "warm-up", None).await;
    wait_until(Duration::from_secs(20), || async {
        cluster.leader_of(&submitter).await.as_deref() == Some("a")
    })
    .await;
    cluster.add_node_with("b", with_extra).await;

    let b = cluster.node_ref("b").base();
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let tx_id = create(&cluster, &b, &submitter, "traced", Some(&caller)).await;
    assert_eq!(
        cluster.leader_of(&submitter).await.as_deref(),
        Some("a"),
        "the leader stays on a"
    );

    // The webhook delivery carries the intent's trace.
    wait_until(Duration::from_secs(60), || async {
        hook.delivered()
            .iter()
            .any(|r| r.json["tx_id"] == tx_id.to_string())
    })
    .await;
    let delivery = hook
        .delivered()
        .into_iter()
        .find(|r| r.json["tx_id"] == tx_id.to_string())
        .expect("delivered");
    assert!(
        delivery
            .traceparent
            .starts_with(&format!("00-{CALLER_TRACE}-")),
        "webhook traceparent {:?}",
        delivery.traceparent
    );

    // Every step reaches the collector, as one trace.
    wait_until(Duration::from_secs(30), || async {
        let spans = otlp.trace(CALLER_TRACE);
        STEPS
            .iter()
            .all(|step| spans.iter().any(|s| s.name == *step))
    })
    .await;
    let spans = otlp.trace(CALLER_TRACE);
    let create = one(&spans, "txmgr.create");
    assert_eq!(
        create.parent_span_id, CALLER_SPAN,
        "the caller's span is the parent"
    );
    assert_eq!(create.node, "b");
    assert_eq!(
        create.attributes.get("txmgr.tx_id"),
        Some(&tx_id.to_string())
    );
    let insert = one(&spans, "txmgr.store.insert");
    assert_eq!(
        (insert.node.as_str(), insert.parent_span_id.as_str()),
        ("b", create.span_id.as_str())
    );
    for step in [
        "txmgr.allocate",
        "txmgr.sign",
        "txmgr.broadcast",
        "txmgr.receipt",
        "txmgr.finality",
    ] {
        let span = one(&spans, step);
        assert_eq!(span.node, "a", "{step} runs on the leader");
        assert_eq!(
            span.parent_span_id, create.span_id,
            "{step} continues the create's trace"
        );
    }
    // The warm-up intent had nonce 0.
    assert_eq!(
        one(&spans, "txmgr.allocate")
            .attributes
            .get("txmgr.nonce")
            .map(String::as_str),
        Some("1")
    );
    assert!(one(&spans, "txmgr.sign")
        .attributes
        .contains_key("txmgr.signer"));
    let broadcast = one(&spans, "txmgr.broadcast");
    let endpoint = broadcast
        .attributes
        .get("txmgr.endpoint")
        .expect("endpoint name");
    assert!(
        !endpoint.is_empty() && !endpoint.contains("://"),
        "a name, never the URL: {endpoint}"
    );
    assert_eq!(
        broadcast
            .attributes
            .get("txmgr.outcome")
            .map(String::as_str),
        Some("accepted")
    );
    assert_eq!(
        one(&spans, "txmgr.finality")
            .attributes
            .get("txmgr.state")
            .map(String::as_str),
        Some("CONFIRMED")
    );
    let webhook = one(&spans, "txmgr.webhook.delivery");
    assert_eq!(webhook.parent_span_id, create.span_id);
    assert_eq!(
        delivery.traceparent,
        format!("00-{CALLER_TRACE}-{}-01", webhook.span_id),
        "the receiver's parent is the delivery span"
    );

    // The collector dies mid-burst: every intent completes anyway.
    let spans_before = otlp.spans().len();
    let load = cluster.load(40, 20, 17);
    wait_until(Duration::from_secs(30), || async {
        otlp.spans().len() >= spans_before + 20
    })
    .await;
    // A create without a traceparent is the root of its own trace.
    assert!(
        otlp.spans().iter().any(|s| s.name == "txmgr.create"
            && s.parent_span_id.is_empty()
            && s.trace_id != CALLER_TRACE),
        "creates without traceparent start new traces"
    );
    otlp.kill().await;
    let mut acked = load.finish().await;
    acked.push(Acked {
        request_id: "traced".to_owned(),
        tx_id,
    });
    acked.push(Acked {
        request_id: "warm-up".to_owned(),
        tx_id: warm_up,
    });
    cluster.verify(&acked).await;
    // What could not be exported is counted, on some node.
    let bases: Vec<String> = cluster.daemons.iter().map(|d| d.base()).collect();
    wait_until(Duration::from_secs(30), || async {
        let mut failed = 0.0;
        for base in &bases {
            failed += export_failures(&cluster.client, base).await;
        }
        failed > 0.0
    })
    .await;
}
