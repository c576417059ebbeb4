//! `--daemon`: phases "one" and "many" against a real `txmgr run` process,
//! once per `--daemon-variants` entry: as shipped (`plain`), exporting every
//! trace to a local collector (`tracing`), and with bearer tokens
//! configured (`token`). Each pass has its own database, keys and process,
//! so the rows side by side differ only in the variant.

use std::time::Duration;

use alloy::primitives::Address;
use anyhow::Context;
use clap::ValueEnum;
use serde::Serialize;

use crate::{
    anvil::{self, Anvil},
    daemon::{Daemon, DaemonTokens},
    keys::{self, TxmgrKeys},
    node::{self, BenchDb},
    otlp_sink::{OtlpSink, TraceExport},
    phases::{Target, TxmgrBench},
    report::TxmgrPhase,
    session::{closed_and_open_loops, settings},
    Args,
};

/// How the daemon of a pass is configured beyond the in-process node's
/// settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DaemonVariant {
    /// The shipped configuration: no tracing, no tokens (loopback).
    Plain,
    /// `[telemetry]` with `sample_ratio = 1.0` to a collector in the bench
    /// that accepts and drops every export.
    Tracing,
    /// A client and an ops `[[auth.tokens]]` entry; every create carries the
    /// client token.
    Token,
}

impl DaemonVariant {
    /// The row name in the tables.
    pub(crate) fn row_name(self) -> &'static str {
        match self {
            DaemonVariant::Plain => "txmgr run (a process)",
            DaemonVariant::Tracing => "txmgr run + tracing",
            DaemonVariant::Token => "txmgr run + token",
        }
    }

    /// Position in the key plan: each variant has its own keys.
    pub(crate) fn key_slot(self) -> u64 {
        match self {
            DaemonVariant::Plain => 0,
            DaemonVariant::Tracing => 1,
            DaemonVariant::Token => 2,
        }
    }
}

/// What one daemon pass measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DaemonPass {
    /// How the daemon was configured.
    pub(crate) variant: DaemonVariant,
    /// One submitter.
    pub(crate) one: Option<TxmgrPhase>,
    /// One per `--submitters` count.
    pub(crate) many: Vec<TxmgrPhase>,
    /// `tracing`: what the collector received and the daemon dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) traces: Option<TraceExport>,
}

impl DaemonPass {
    /// Its phases, one submitter first.
    pub(crate) fn phases(&self) -> impl Iterator<Item = &TxmgrPhase> {
        self.one.iter().chain(&self.many)
    }

    /// Its phases, mutable.
    pub(crate) fn phases_mut(&mut self) -> impl Iterator<Item = &mut TxmgrPhase> {
        self.one.iter_mut().chain(&mut self.many)
    }
}

/// Starts a `txmgr run` process (the `txmgr` binary: `--txmgr`, else next
/// to this one) with the configuration the in-process node gets plus
/// `variant`'s, logging at the shipped default, its submitters' keys in its
/// environment, and drives it over loopback HTTP like the in-process node,
/// its CPU counted apart.
pub(crate) async fn run_daemon(
    args: &Args,
    variant: DaemonVariant,
    keys_of_node: &TxmgrKeys,
    anvil: &Anvil,
    db: &BenchDb,
) -> anyhow::Result<DaemonPass> {
    let submitters = keys_of_node.submitters();
    let addresses: Vec<Address> = submitters.iter().map(|(a, _, _)| *a).collect();
    anvil::fund(anvil, &addresses).await?;
    let env_submitters: Vec<(Address, String)> = submitters
        .iter()
        .map(|(a, var, _)| (*a, var.clone()))
        .collect();
    let env: Vec<(String, String)> = submitters
        .iter()
        .map(|(_, var, key)| (var.clone(), keys::private_key_hex(key)))
        .collect();
    let chains = [(anvil.chain_id(), anvil.rpc_url())];
    let port = txmgr_testkit::try_free_port()?;
    let mut toml = node::config_toml(&db.url, &chains, &settings(args, 0, false), &env_submitters)
        .replace(
            "[http]\n",
            &format!("[http]\nlisten = \"127.0.0.1:{port}\"\n"),
        );
    let sink = match variant {
        DaemonVariant::Tracing => Some(OtlpSink::start().await?),
        _ => None,
    };
    if let Some(sink) = &sink {
        toml.push_str(&format!(
            "[telemetry]\notlp_endpoint = \"{}\"\nsample_ratio = 1.0\n",
            sink.endpoint
        ));
    }
    let tokens = (variant == DaemonVariant::Token).then(DaemonTokens::new);
    if let Some(tokens) = &tokens {
        toml.push_str(&tokens.toml());
    }
    let bin = crate::daemon::txmgr_bin(args.idle.txmgr.as_deref())?;
    let mut daemon = Daemon::spawn(&bin, "bench", port, &toml, &env, None)?.with_tokens(tokens);
    let http = reqwest::Client::new();
    daemon
        .wait_ready(&http, submitters.len(), Duration::from_secs(120))
        .await
        .with_context(|| format!("starting the txmgr run process ({variant:?})"))?;
    let bench = TxmgrBench::new(args, Target::Process(&daemon), db, &[anvil], Vec::new())?;
    let outcome = closed_and_open_loops(args, &bench, keys_of_node, false).await;
    let traces = match &sink {
        Some(sink) => Some(trace_export(&daemon, &bench.client, sink).await?),
        None => None,
    };
    drop(bench);
    daemon.kill().await;
    let phases = outcome?;
    Ok(DaemonPass {
        variant,
        one: phases.one,
        many: phases.many,
        traces,
    })
}

/// How often the span counters are read while the export settles: longer
/// than the exporter's scheduled delay (500 ms).
const EXPORT_SETTLE_POLL: Duration = Duration::from_millis(600);

/// Longest wait for the last spans to leave.
const EXPORT_SETTLE_TIMEOUT: Duration = Duration::from_secs(15);

/// The collector's counts and the daemon's span counters once its export
/// has settled after the phases (two reads a scheduled delay apart agree),
/// or at [`EXPORT_SETTLE_TIMEOUT`].
async fn trace_export(
    daemon: &Daemon,
    client: &reqwest::Client,
    sink: &OtlpSink,
) -> anyhow::Result<TraceExport> {
    let deadline = std::time::Instant::now() + EXPORT_SETTLE_TIMEOUT;
    let mut last: Option<TraceExport> = None;
    loop {
        let (requests, bytes) = sink.received();
        let now = TraceExport {
            requests,
            bytes,
            spans_exported: daemon
                .metric_sum(client, "txmgr_trace_spans_exported_total")
                .await?,
            spans_dropped: daemon
                .metric_sum(client, "txmgr_trace_spans_dropped_total")
                .await?,
        };
        let settled = last.as_ref().is_some_and(|before| {
            before.requests == now.requests
                && before.spans_exported == now.spans_exported
                && before.spans_dropped == now.spans_dropped
        });
        if (settled && now.requests > 0) || std::time::Instant::now() >= deadline {
            return Ok(now);
        }
        last = Some(now);
        tokio::time::sleep(EXPORT_SETTLE_POLL).await;
    }
}
