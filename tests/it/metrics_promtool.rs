//! The `/metrics` exposition passes Prometheus' own linter: every `txmgr_`
//! metric has `# HELP` and `# TYPE`, counters end in `_total`, units are
//! spelled as Prometheus expects. A tracking actor is restarted first, so
//! the restart counter is in the exposition too; that every metric defined
//! is described at all is `txmgr_actors::metrics`' own unit test. Needs `promtool` (Debian's `prometheus`
//! package; `scripts/test.sh` installs it).

use std::{io::Write, process::Stdio, time::Duration};

use crate::common::{receiver::Receiver, wait_until, Scenario};
use serde_json::json;
use txmgr_actors::supervisor::TrackerChild;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_exposition_passes_promtool_check_metrics() {
    // A threshold above the dev balance: LOW_BALANCE at the first sweep,
    // pushed to a webhook, so the funds and webhook metrics have samples.
    let receiver = Receiver::always_ok().await;
    std::env::set_var("TXMGR_PROMTOOL_HOOK_SECRET", "s");
    let Scenario {
        db: _db,
        anvil: _anvil,
        node,
    } = Scenario::single_node(&format!(
        "min_balance = \"1000000000000000000000000000000\"\n[[webhooks]]\nname = \"m\"\n\
         url = \"{}\"\nsecret_env = \"TXMGR_PROMTOOL_HOOK_SECRET\"\nstart_at = \"beginning\"",
        receiver.url
    ))
    .await;
    let body = json!({"submitter": crate::common::DEV_ADDRESS_0.to_lowercase(),
        "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "value": "1", "request_id": "m1"});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
    // One tracking actor is restarted, so the restart counter has a sample
    // (its HELP line was missing once, unnoticed while nothing restarted).
    let tree = node.engine.tracker();
    let worker = tree
        .children()
        .into_iter()
        .find(|child| *child != TrackerChild::Head)
        .expect("a pool worker");
    tree.cell(worker).expect("running").kill();
    // Every kind of metric has samples: counters, gauges, the RPC histogram.
    let handle = txmgr::daemon::metrics_recorder().expect("recorder");
    wait_until(Duration::from_secs(20), || async {
        let text = handle.render();
        text.contains("txmgr_broadcasts_total")
            && text.contains("txmgr_rpc_endpoint_latency_seconds_bucket")
            && text.contains("txmgr_rpc_endpoint_healthy")
            && text.contains("txmgr_submitter_balance_wei")
            && text.contains("txmgr_funds_events_total")
            && text.contains("txmgr_webhook_attempts_total")
            && text.contains("txmgr_webhook_delivery_delay_seconds_bucket")
            && text.contains("txmgr_actor_restarts_total")
    })
    .await;
    let text = handle.render();
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool not found: install Debian's `prometheus` package (scripts/test.sh does)");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write exposition");
    let out = promtool.wait_with_output().expect("promtool ran");
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && findings.trim().is_empty(),
        "promtool check metrics found problems:\n{findings}\n--- exposition ---\n{text}"
    );
    for line in text.lines().filter(|l| l.starts_with("txmgr_")) {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        let base = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        assert!(
            text.contains(&format!("# HELP {base} ")),
            "{name} has no # HELP line"
        );
    }
    node.stop().await;
}
