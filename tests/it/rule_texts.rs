//! What the shipped Prometheus rules (`deploy/prometheus/txmgr-rules.yml`,
//! README "Alerts and dashboards") say, checked against the code and the
//! dashboard: every recording rule is used by an alert, another rule or a
//! panel, and README lists exactly the ones there are; every runbook that
//! has an operator change config.toml names the keys (in backticks) and
//! says "restart" where the reload does not apply one of them
//! (`txmgr::daemon::needs_restart`, the list the reload reports as
//! `restart_required`) and `POST /v1/ops/reload` only where it applies one.
//!
//! The rules file is read line by line (no YAML parser in the build): each
//! alert is a `- alert:` line and its annotations one line each.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path)
}

fn rules() -> String {
    read("deploy/prometheus/txmgr-rules.yml")
}

/// The names of the recording rules.
fn recorded(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- record:"))
        .map(|name| name.trim().to_owned())
        .collect()
}

/// `(alert, runbook)` for every alert, the runbook unescaped.
fn runbooks(rules: &str) -> Vec<(String, String)> {
    let mut alert = String::new();
    let mut found = Vec::new();
    for line in rules.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert:") {
            alert = name.trim().to_owned();
        } else if let Some(text) = line.strip_prefix("runbook:") {
            let text = text.trim().trim_matches('"').replace("\\\"", "\"");
            found.push((alert.clone(), text));
        }
    }
    found
}

/// The backticked tokens of `text` that are configuration keys: their
/// first segment is a top-level key of config.toml.
fn config_keys(text: &str) -> Vec<String> {
    let top: Vec<&str> = txmgr::config::TOP_LEVEL_KEYS
        .iter()
        .copied()
        .chain(["webhooks"])
        .collect();
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|token| {
            let first = token.split(['.', '[']).next().unwrap_or(token);
            top.contains(&first) && !token.contains(' ')
        })
        .map(str::to_owned)
        .collect()
}

/// What is wrong with one runbook's config advice.
fn advice_problems(alert: &str, runbook: &str) -> Vec<String> {
    let keys = config_keys(runbook);
    let lower = runbook.to_lowercase();
    // Advice to reload is `POST /v1/ops/reload` (or SIGHUP); a sentence
    // saying what a reload does not do is no such advice.
    let says_reload = lower.contains("/v1/ops/reload") || lower.contains("sighup");
    let says_restart = lower.contains("restart");
    let mut problems = Vec::new();
    if (says_reload || lower.contains("config.toml")) && keys.is_empty() {
        problems.push(format!(
            "{alert}: changes config.toml without naming the keys in backticks: {runbook}"
        ));
    }
    let (restart, reload): (Vec<&String>, Vec<&String>) = keys
        .iter()
        .partition(|key| txmgr::daemon::needs_restart(key));
    if !restart.is_empty() && !says_restart {
        problems.push(format!(
            "{alert}: {restart:?} need a restart, the runbook does not say so: {runbook}"
        ));
    }
    if says_reload && !keys.is_empty() && reload.is_empty() {
        problems.push(format!(
            "{alert}: says reload, but a reload applies none of {keys:?}: {runbook}"
        ));
    }
    problems
}

#[test]
fn runbooks_say_restart_for_every_key_a_reload_does_not_apply() {
    let runbooks = runbooks(&rules());
    assert!(runbooks.len() >= 20, "{} runbooks found", runbooks.len());
    let problems: Vec<String> = runbooks
        .iter()
        .flat_map(|(alert, runbook)| advice_problems(alert, runbook))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_advice_check_catches_a_reload_promised_for_a_restart_key() {
    // The round-two text of TxmgrNoHealthyRpcEndpoint, and the same with
    // its keys named: both are caught.
    let unnamed = "Action: fix or replace the endpoint (rpc_url / rpc_urls of the chain in config.toml, then POST /v1/ops/reload).";
    assert_eq!(advice_problems("A", unnamed).len(), 1);
    let named =
        "Action: replace `chains.<name>.rpc_urls` in config.toml, then POST /v1/ops/reload.";
    assert_eq!(advice_problems("A", named).len(), 2);
    let right = "Action: replace `chains.<name>.rpc_urls` in config.toml and restart the node.";
    assert!(advice_problems("A", right).is_empty());
}

#[test]
fn every_recording_rule_is_used_and_the_readme_lists_them() {
    let rules = rules();
    let names = recorded(&rules);
    assert!(!names.is_empty());
    // Where a rule can be used: another rule's or an alert's expression,
    // a dashboard panel's. Annotations and comments do not count.
    let expressions: String = rules
        .lines()
        .filter(|line| {
            let line = line.trim();
            !line.starts_with('#')
                && !line.starts_with("- record:")
                && !["summary:", "description:", "runbook:"]
                    .iter()
                    .any(|key| line.starts_with(key))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dashboard = read("deploy/grafana/txmgr.json");
    let unused: Vec<&String> = names
        .iter()
        .filter(|name| !expressions.contains(name.as_str()) && !dashboard.contains(name.as_str()))
        .collect();
    assert!(
        unused.is_empty(),
        "recording rules nothing uses: {unused:?}"
    );

    let readme = read("README.md");
    let start = readme.find("## Alerts and dashboards").expect("section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let named: Vec<&str> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|token| token.starts_with("txmgr:"))
        .collect();
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !named.contains(&name.as_str()))
        .collect();
    let stale: Vec<&&str> = named
        .iter()
        .filter(|token| !names.iter().any(|name| name == *token))
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "README \"Alerts and dashboards\": rules not listed {missing:?}, listed but absent {stale:?}"
    );
}
