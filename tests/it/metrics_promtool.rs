//! The `/metrics` exposition passes Prometheus' own linter: every `txmgr_`
//! metric has `# HELP` and `# TYPE`, counters end in `_total`, units are
//! spelled as Prometheus expects. A tracking actor is restarted first, so
//! the restart counter is in the exposition too; that every metric defined
//! is described at all is `txmgr_actors::metrics`' own unit test. Every
//! series carries `chain` but those of the node as a whole
//! (`txmgr_actors::metrics::NODE_LEVEL`, named in README "Operations"),
//! which carry none. Needs `promtool` (Debian's `prometheus` package;
//! `scripts/test.sh` installs it).

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
    // An operator action, so its counter is in the exposition too: on an
    // intent that stays QUEUED (its submitter paused), so the cancel is
    // always possible.
    let submitter = crate::common::DEV_ADDRESS_0.to_lowercase();
    let pause = format!("/v1/ops/submitters/{submitter}/pause");
    let (status, answer) = node
        .request("POST", &pause, Some(json!({"reason": "metrics test"})))
        .await;
    assert_eq!(status, 200, "{answer}");
    let second = json!({"submitter": submitter,
        "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "value": "1", "request_id": "m2"});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(second)).await;
    assert_eq!(status, 202, "{answer}");
    let cancel = format!(
        "/v1/transactions/{}/cancel",
        answer["tx_id"].as_str().expect("tx_id")
    );
    let (status, answer) = node.request("POST", &cancel, Some(json!({}))).await;
    assert_eq!(status, 202, "{answer}");
    let text = handle.render();
    let mislabelled = chain_label_problems(&text);
    assert!(
        mislabelled.is_empty(),
        "{mislabelled:#?}\n--- exposition ---\n{text}"
    );
    check_with_promtool(&text);
    node.stop().await;
}

/// `promtool check metrics` finds nothing in the exposition `text`, and
/// every `txmgr_` sample has a `# HELP` line.
pub(crate) fn check_with_promtool(text: &str) {
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
}

/// The base name of a sample line's metric (`_bucket`, `_sum`, `_count` of
/// a histogram taken off).
fn base_name(line: &str) -> &str {
    let name = line.split(['{', ' ']).next().unwrap_or_default();
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name)
}

/// Samples whose `chain` label contradicts the node-level list: a node-level
/// metric with `chain`, or another metric without it.
fn chain_label_problems(exposition: &str) -> Vec<String> {
    let node_level = txmgr_actors::metrics::NODE_LEVEL;
    let mut problems = Vec::new();
    for line in exposition.lines().filter(|l| l.starts_with("txmgr_")) {
        let base = base_name(line);
        let labels = line
            .split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .map_or("", |(set, _)| set);
        let has_chain = labels.split(',').any(|pair| pair.starts_with("chain=\""));
        match (node_level.contains(&base), has_chain) {
            (true, true) => problems.push(format!("node-level {base} carries chain: {line}")),
            (false, false) => problems.push(format!("{base} has no chain label: {line}")),
            _ => {}
        }
    }
    problems
}

/// README "Operations" names every node-level metric where it says which
/// metrics carry no `chain`.
#[test]
fn the_readme_names_every_metric_without_a_chain_label() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("README");
    let start = readme
        .find("**Metrics** (prefix `txmgr_`")
        .expect("README \"Operations\" has its **Metrics** paragraph");
    let paragraph = &readme[start..];
    let paragraph = &paragraph[..paragraph.find("\n\n").unwrap_or(paragraph.len())];
    let unnamed: Vec<&str> = txmgr_actors::metrics::NODE_LEVEL
        .iter()
        .filter(|name| {
            let named = paragraph.contains(&format!("`{name}`"));
            let by_pattern =
                name.starts_with("txmgr_webhook_") && paragraph.contains("`txmgr_webhook_*`");
            !(named || by_pattern)
        })
        .copied()
        .collect();
    assert!(
        unnamed.is_empty(),
        "not named in README \"Metrics\": {unnamed:?}\n{paragraph}"
    );
}
