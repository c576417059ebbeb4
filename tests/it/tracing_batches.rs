//! Traced intents still go out in JSON-RPC batches (README "Tracing"):
//! intents queued behind a pause leave together on resume, in one batch
//! request, and each intent's trace has its own `txmgr.broadcast` span —
//! the batch's start, its own call's outcome. Before, tracing turned
//! batching off: one request per intent.

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::common::{
    cluster::{Cluster, ClusterSpec},
    otlp::{OtlpReceiver, ReceivedSpan},
    post_json, wait_until, Anvil,
};

/// Intents queued behind the pause.
const QUEUED: usize = 6;

/// The `txmgr.broadcast` spans of the trace whose create names `tx_id`.
fn broadcasts_of(spans: &[ReceivedSpan], tx_id: Uuid) -> Vec<ReceivedSpan> {
    let id = tx_id.to_string();
    let Some(create) = spans
        .iter()
        .find(|s| s.name == "txmgr.create" && s.attributes.get("txmgr.tx_id") == Some(&id))
    else {
        return Vec::new();
    };
    spans
        .iter()
        .filter(|s| s.name == "txmgr.broadcast" && s.trace_id == create.trace_id)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traced_intents_queued_together_leave_in_one_batch_each_with_its_span() {
    let otlp = OtlpReceiver::start().await;
    let spec = ClusterSpec {
        nodes: vec![],
        submitters: vec![0],
        strict: vec![],
        node_extra: "",
        confirmations: 1,
    };
    let mut cluster = Cluster::start(spec, Anvil::start().await, None).await;
    let telemetry = format!(
        "\n[telemetry]\notlp_endpoint = \"{}\"\nsample_ratio = 1.0\n",
        otlp.endpoint
    );
    cluster
        .add_node_with("a", |config| config + &telemetry)
        .await;
    let (client, submitter) = (cluster.client.clone(), cluster.submitters[0].clone());
    let a = cluster.node_ref("a").base();
    let transfer = |request_id: String| {
        json!({"submitter": submitter, "to": "0x000000000000000000000000000000000000dEaD",
               "value": "1", "request_id": request_id})
    };
    // A first intent makes a the leader.
    let (status, answer) =
        post_json(&client, &a, "/v1/transactions", transfer("first".into())).await;
    assert_eq!(status, 202, "{answer}");
    wait_until(Duration::from_secs(20), || async {
        cluster.leader_of(&submitter).await.as_deref() == Some("a")
    })
    .await;

    let pause = format!("/v1/ops/submitters/{submitter}/pause");
    let (status, answer) = post_json(&client, &a, &pause, json!({"reason": "queue a batch"})).await;
    assert_eq!(status, 200, "{answer}");
    let mut queued = Vec::new();
    for i in 0..QUEUED {
        let (status, answer) = post_json(
            &client,
            &a,
            "/v1/transactions",
            transfer(format!("queued-{i}")),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        queued.push(
            answer["tx_id"]
                .as_str()
                .and_then(|id| id.parse::<Uuid>().ok())
                .expect("tx_id"),
        );
    }
    let resume = format!("/v1/ops/submitters/{submitter}/resume");
    let (status, answer) = post_json(&client, &a, &resume, json!({"reason": "send them"})).await;
    assert_eq!(status, 200, "{answer}");

    // Every queued intent's broadcast is a span of its own trace.
    wait_until(Duration::from_secs(30), || async {
        let spans = otlp.spans();
        queued
            .iter()
            .all(|tx_id| !broadcasts_of(&spans, *tx_id).is_empty())
    })
    .await;
    let spans = otlp.spans();
    let mut starts = Vec::new();
    for tx_id in &queued {
        let broadcasts = broadcasts_of(&spans, *tx_id);
        assert_eq!(
            broadcasts.len(),
            1,
            "one endpoint, one answer: {broadcasts:#?}"
        );
        let span = &broadcasts[0];
        assert_eq!(
            span.attributes.get("txmgr.outcome").map(String::as_str),
            Some("accepted"),
            "{span:#?}"
        );
        starts.push(span.start_unix_nano);
    }
    // One request carried them all: sent one by one, each would start
    // after the previous answer.
    starts.dedup();
    assert_eq!(
        starts.len(),
        1,
        "the queued intents left in one batch request"
    );
}
