//! `GET /healthz` (the process answers), `GET /readyz` (database reachable,
//! migrations current, chain reachable with the configured chain id, as last
//! checked in the background) and `GET /metrics` (Prometheus text).

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Extension, Json,
};
use serde::Serialize;

use super::{
    auth::Caller,
    error::{ApiError, ErrorResponse},
    AppState,
};

/// Body of `/healthz` and `/readyz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HealthView {
    /// `ok` or `not_ready`.
    pub status: &'static str,
    /// This node's release (`CHANGELOG.md`).
    pub version: &'static str,
    /// The commit it was built from.
    pub commit: &'static str,
    /// Why not ready (empty when ready).
    pub reasons: Vec<String>,
    /// `/readyz`: each chain's state (a chain out of service shows here
    /// without taking the node out of service while another chain serves).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<super::readiness::ChainState>,
}

/// `GET /healthz`: the process is alive and serving.
#[utoipa::path(get, path = "/healthz", tag = "meta",
    responses((status = 200, description = "the process answers", body = HealthView)))]
pub(crate) async fn healthz() -> Json<HealthView> {
    Json(HealthView {
        status: "ok",
        version: crate::build_info::VERSION,
        commit: crate::build_info::COMMIT,
        reasons: Vec::new(),
        chains: Vec::new(),
    })
}

/// `GET /readyz`: 200 when every dependency was usable at the last
/// background check, 503 with reasons (also when that check is too old).
/// Touches neither the database nor the chain ([`super::readiness`]).
#[utoipa::path(get, path = "/readyz", tag = "meta",
    responses(
        (status = 200, description = "ready: database reachable and migrated, and at least one chain with a healthy RPC endpoint (as last checked in the background); `chains` lists each chain's state", body = HealthView),
        (status = 503, description = "not ready, with reasons (also when the last background check is too old)", body = HealthView)))]
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let reasons = match &state.ops.readiness {
        Some(readiness) => readiness.reasons(),
        None => vec!["readiness: not monitored in this process".to_owned()],
    };
    let chains = state
        .ops
        .readiness
        .as_ref()
        .map(|readiness| readiness.chains())
        .unwrap_or_default();
    let ready = reasons.is_empty();
    let body = HealthView {
        status: if ready { "ok" } else { "not_ready" },
        version: crate::build_info::VERSION,
        commit: crate::build_info::COMMIT,
        reasons,
        chains,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain"),
        (status = 403, description = "forbidden: the token is limited to some submitters (the exposition lists every submitter's balance and spend)", body = ErrorResponse),
        (status = 503, description = "unavailable: no metrics recorder in this process", body = ErrorResponse)))]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
) -> Response {
    // No caller: `http.metrics_public` opened the path to everyone.
    if let Some(Extension(caller)) = caller {
        if let Err(refused) = caller.check_unscoped("read /metrics (every submitter's series)") {
            return refused.into_response();
        }
    }
    match &state.ops.metrics {
        Some(handle) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            without_chains(handle.render(), &state.chains.retired()),
        )
            .into_response(),
        None => ApiError::Unavailable("no metrics recorder in this process".into()).into_response(),
    }
}

/// The exposition without the samples of chains a reload removed: their
/// gauges would otherwise go on showing the last values (a removed chain
/// "healthy", its leases "held"). Prometheus marks the series stale.
fn without_chains(text: String, retired: &[String]) -> String {
    if retired.is_empty() {
        return text;
    }
    let labels: Vec<String> = retired
        .iter()
        .map(|name| {
            let escaped = name.replace('\\', "\\\\").replace('"', "\\\"");
            format!("chain=\"{escaped}\"")
        })
        .collect();
    let retired_sample = |line: &str| {
        !line.starts_with('#')
            && labels.iter().any(|label| {
                line.match_indices(label.as_str())
                    .any(|(at, _)| matches!(line[..at].chars().last(), Some('{' | ',')))
            })
    };
    let mut kept = String::with_capacity(text.len());
    for line in text.lines().filter(|line| !retired_sample(line)) {
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::without_chains;

    #[test]
    fn a_retired_chains_samples_are_left_out_and_the_others_kept() {
        let text = "# HELP txmgr_x x\n# TYPE txmgr_x gauge\n\
                    txmgr_x{chain=\"base\"} 1\n\
                    txmgr_x{chain=\"mainnet\"} 1\n\
                    txmgr_y_bucket{endpoint=\"a\",chain=\"base\",le=\"1\"} 2\n\
                    txmgr_z{other_chain=\"base\"} 3\n\
                    txmgr_w 4\n";
        let kept = without_chains(text.to_owned(), &["base".to_owned()]);
        assert_eq!(
            kept,
            "# HELP txmgr_x x\n# TYPE txmgr_x gauge\n\
             txmgr_x{chain=\"mainnet\"} 1\n\
             txmgr_z{other_chain=\"base\"} 3\n\
             txmgr_w 4\n"
        );
        assert_eq!(without_chains(text.to_owned(), &[]), text);
    }
}
