//! The shipped Grafana dashboard (`deploy/grafana/txmgr.json`, README
//! "Alerts and dashboards"), checked as Grafana would use it — Grafana
//! itself cannot be installed here: the schema fields Grafana requires,
//! every template variable's `label_values` and every panel target's PromQL
//! evaluated by a real Prometheus scraping a real daemon under a small
//! workload. Each must return at least one series.

use std::{collections::HashSet, time::Duration};

use serde_json::Value;

use crate::common::{prometheus::Observed, receiver::Receiver, wait_until};

fn dashboard() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/txmgr.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("dashboard file"))
        .expect("dashboard is JSON")
}

/// What Grafana needs to import and draw the dashboard; returns the
/// problems found.
fn schema_problems(dashboard: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for key in [
        "title",
        "uid",
        "schemaVersion",
        "panels",
        "templating",
        "time",
    ] {
        if dashboard.get(key).is_none() {
            problems.push(format!("missing top-level `{key}`"));
        }
    }
    let variables: HashSet<String> = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    let mut ids = HashSet::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or("?");
        match panel["id"].as_u64() {
            Some(id) if ids.insert(id) => {}
            _ => problems.push(format!("{title}: missing or repeated `id`")),
        }
        if panel["type"].as_str().is_none() {
            problems.push(format!("{title}: no `type`"));
        }
        let grid = &panel["gridPos"];
        if ["h", "w", "x", "y"]
            .iter()
            .any(|k| grid[k].as_u64().is_none())
            || grid["x"].as_u64().unwrap_or(0) + grid["w"].as_u64().unwrap_or(0) > 24
        {
            problems.push(format!(
                "{title}: `gridPos` needs h, w, x, y within 24 columns"
            ));
        }
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            problems.push(format!("{title}: no targets"));
        }
        for target in &targets {
            if target["refId"].as_str().is_none() || target["expr"].as_str().is_none() {
                problems.push(format!("{title}: a target without refId or expr"));
            }
            let expr = target["expr"].as_str().unwrap_or_default();
            for used in expr.split('$').skip(1) {
                let name: String = used
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.starts_with("__") && !variables.contains(&name) {
                    problems.push(format!("{title}: uses undefined variable ${name}"));
                }
            }
        }
        if panel["datasource"]["uid"] != "${datasource}" {
            problems.push(format!(
                "{title}: datasource is not the $datasource variable"
            ));
        }
    }
    problems
}

/// A panel expression as Grafana sends it with every variable at "All".
fn expand(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$instance", ".*")
        .replace("$chain", ".*")
        .replace("$submitter", ".*")
}

/// Panels that draw (rows aside), their targets, and the template
/// variables that query Prometheus (`label_values`).
fn query_counts(dashboard: &Value) -> (usize, usize, usize) {
    let panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|panel| panel["type"] != "row")
        .collect();
    let targets = panels
        .iter()
        .map(|panel| panel["targets"].as_array().map_or(0, Vec::len))
        .sum();
    let variables = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|variable| {
            variable["definition"]
                .as_str()
                .is_some_and(|d| d.starts_with("label_values("))
        })
        .count();
    (panels.len(), targets, variables)
}

#[test]
fn the_readme_states_what_the_dashboard_test_evaluates() {
    let (panels, targets, variables) = query_counts(&dashboard());
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("README");
    let claim = format!("({targets} targets in {panels} panels");
    assert!(readme.contains(&claim), "README does not say {claim}");
    let claim = format!("`label_values` ({variables})");
    assert!(readme.contains(&claim), "README does not say {claim}");
}

#[test]
fn the_dashboard_has_what_grafana_requires() {
    let problems = schema_problems(&dashboard());
    assert!(problems.is_empty(), "{problems:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_panel_and_variable_query_returns_series_from_a_real_prometheus() {
    let receiver = Receiver::always_ok().await;
    let observed = Observed::start(&receiver.url).await;
    let (cluster, prometheus) = (&observed.cluster, &observed.prometheus);
    observed.transfers("dash", 10).await;
    cluster
        .db
        .wait_count(
            "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
            10,
        )
        .await;

    let dashboard = dashboard();
    let mut pending: Vec<(String, String)> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap_or("?").to_owned();
            panel["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(move |t| Some((title.clone(), expand(t["expr"].as_str()?))))
        })
        .collect();
    assert_eq!(pending.len(), query_counts(&dashboard).1, "every target");
    let mut errors: Vec<String> = Vec::new();
    // Series appear as the workload's metrics are scraped: ask until each
    // query has answered with one, or the deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !pending.is_empty() && std::time::Instant::now() < deadline {
        let mut still = Vec::new();
        for (title, expr) in pending {
            match prometheus.query(&expr).await {
                Ok(series) if !series.is_empty() => {}
                Ok(_) => still.push((title, expr)),
                Err(err) => errors.push(format!("{title}: {err}")),
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    assert!(errors.is_empty(), "queries Prometheus refused: {errors:#?}");
    assert!(
        pending.is_empty(),
        "panels without a series after the workload: {pending:#?}"
    );
    // The template variables list values too.
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(query) = variable["definition"].as_str() else {
            continue;
        };
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .expect("label_values(selector, label)");
        let (selector, label) = inner.rsplit_once(',').expect("selector, label");
        let selector = expand(selector.trim());
        wait_until(Duration::from_secs(30), || async {
            !prometheus
                .label_values(&selector, label.trim())
                .await
                .is_empty()
        })
        .await;
    }
}
