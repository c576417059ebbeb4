//! `[telemetry]`: OpenTelemetry traces over OTLP/HTTP (README "Tracing").
//! Off unless `otlp_endpoint` is set. The exporter's connection obeys the
//! rules of every other one: the public roots plus `ca_file` as trust
//! anchors, no redirects, and plaintext carrying a secret (the
//! `OTEL_EXPORTER_OTLP_*HEADERS`) refused unless `allow_insecure`
//! ([`super::transport`]).

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

/// Default `telemetry.max_queue`: spans held for export at most.
const DEFAULT_MAX_QUEUE: usize = 4096;

/// Largest `telemetry.max_queue`: the export queue is allocated whole at
/// start, a few hundred bytes per slot.
const MAX_QUEUE: usize = 100_000;

/// The `[telemetry]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`); spans
    /// go to `<base>/v1/traces` as protobuf. Unset: no traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// Share of new traces recorded, 0.0 to 1.0. A create whose
    /// `traceparent` is sampled is always recorded (parent-based).
    pub sample_ratio: f64,
    /// Spans held for export at most; beyond it new spans are dropped and
    /// counted (`txmgr_trace_spans_dropped_total`), never waited for.
    pub max_queue: usize,
    /// One export's time limit; a slower collector costs dropped spans.
    #[serde(with = "humantime_serde")]
    pub export_timeout: Duration,
    /// `service.name` of the spans' resource.
    pub service_name: String,
    /// PEM file of a private CA trusted (besides the public roots) for an
    /// `https://` collector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Allow plaintext `http://` to a non-loopback collector although the
    /// exporter's headers (`OTEL_EXPORTER_OTLP_HEADERS`, usually an API key)
    /// would travel unencrypted (README "Security").
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            sample_ratio: 1.0,
            max_queue: DEFAULT_MAX_QUEUE,
            export_timeout: Duration::from_secs(10),
            service_name: "txmgr".to_owned(),
            ca_file: None,
            allow_insecure: false,
        }
    }
}

impl TelemetryConfig {
    /// The URL spans are posted to: the base with `/v1/traces`, unless the
    /// operator gave that path already.
    pub fn traces_url(&self) -> Option<String> {
        let base = self.otlp_endpoint.as_deref()?.trim_end_matches('/');
        if base.ends_with("/v1/traces") {
            Some(base.to_owned())
        } else {
            Some(format!("{base}/v1/traces"))
        }
    }

    /// The issues of this section.
    pub(crate) fn validate(&self) -> Vec<super::ConfigIssue> {
        let mut issues = Vec::new();
        if let Some(endpoint) = &self.otlp_endpoint {
            if let Err(reason) = super::url::check_url(endpoint, &["http", "https"]) {
                issues.push(super::ConfigIssue::new("telemetry.otlp_endpoint", reason));
            } else if endpoint.split_once("://").is_some_and(|(_, rest)| {
                rest.split(['/', '?', '#'])
                    .next()
                    .unwrap_or("")
                    .contains('@')
            }) {
                issues.push(super::ConfigIssue::new(
                    "telemetry.otlp_endpoint",
                    "must not carry credentials (user@ or user:password@): run a local collector that holds them",
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) || self.sample_ratio.is_nan() {
            issues.push(super::ConfigIssue::new(
                "telemetry.sample_ratio",
                "must be between 0.0 and 1.0",
            ));
        }
        if !(1..=MAX_QUEUE).contains(&self.max_queue) {
            issues.push(super::ConfigIssue::new(
                "telemetry.max_queue",
                format!(
                    "must be between 1 and {MAX_QUEUE} (the queue is allocated whole at start)"
                ),
            ));
        }
        if self.export_timeout.is_zero() || self.export_timeout > Duration::from_secs(300) {
            issues.push(super::ConfigIssue::new(
                "telemetry.export_timeout",
                "must be more than 0s and at most 5m",
            ));
        }
        if let Some(path) = &self.ca_file {
            if let Err(err) = txmgr_actors::tls::client_config(Some(path)) {
                issues.push(super::ConfigIssue::new(
                    "telemetry.ca_file",
                    err.to_string(),
                ));
            }
        }
        if self.service_name.trim().is_empty() || self.service_name.len() > 128 {
            issues.push(super::ConfigIssue::new(
                "telemetry.service_name",
                "must be 1 to 128 characters",
            ));
        }
        issues
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        let mut config = TelemetryConfig::default();
        assert_eq!(config.traces_url(), None);
        config.otlp_endpoint = Some("http://collector:4318".to_owned());
        assert_eq!(
            config.traces_url().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        config.otlp_endpoint = Some("http://collector:4318/v1/traces/".to_owned());
        assert_eq!(
            config.traces_url().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
    }

    #[test]
    fn plaintext_to_a_remote_collector_with_headers_stops_the_load() {
        let text = "[database]\nurl = \"postgres://postgres@127.0.0.1/txmgr\"\n\
                    [chain]\nchain_id = 1\nrpc_url = \"http://127.0.0.1:8545\"\n\
                    [telemetry]\notlp_endpoint = \"http://collector.example:4318\"\n";
        let headers = || {
            vec![(
                "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
                "x-api-key=SECRET".to_owned(),
            )]
        };
        let refused = super::super::Config::from_toml_str(text, headers())
            .expect_err("plaintext to a remote collector with headers must be refused");
        assert!(
            refused
                .issues
                .iter()
                .any(|i| i.key == "telemetry.otlp_endpoint"),
            "{refused:?}"
        );
        assert!(!format!("{refused:?}").contains("SECRET"));
        let warned = super::super::Config::from_toml_str(text, Vec::new())
            .expect("without headers: warned, not refused");
        assert!(warned
            .warnings()
            .iter()
            .any(|i| i.key == "telemetry.otlp_endpoint"));
        let allowed = format!("{text}allow_insecure = true\n");
        assert!(super::super::Config::from_toml_str(&allowed, headers()).is_ok());
    }

    #[test]
    fn bad_values_are_named() {
        let config = TelemetryConfig {
            otlp_endpoint: Some("http://user:secret@collector:4318".to_owned()),
            sample_ratio: 1.5,
            max_queue: 0,
            export_timeout: Duration::ZERO,
            service_name: String::new(),
            ca_file: Some("/nonexistent/otlp-ca.pem".into()),
            allow_insecure: false,
        };
        let fields: Vec<String> = config.validate().into_iter().map(|i| i.key).collect();
        assert_eq!(
            fields,
            [
                "telemetry.otlp_endpoint",
                "telemetry.sample_ratio",
                "telemetry.max_queue",
                "telemetry.export_timeout",
                "telemetry.ca_file",
                "telemetry.service_name"
            ]
        );
        assert!(TelemetryConfig::default().validate().is_empty());
        let ftp = TelemetryConfig {
            otlp_endpoint: Some("ftp://collector".to_owned()),
            ..TelemetryConfig::default()
        };
        assert_eq!(ftp.validate().len(), 1);
    }
}
