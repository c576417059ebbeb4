//! The benchmark's own test: a small run of its closed-loop phases and of
//! its idle phase (a real `txmgr run` process, fail-over included) against
//! real PostgreSQL and anvil, read back from `--json`.
//!
//! The figures themselves are not asserted (performance is never measured
//! by a test); what is asserted is that every phase runs to its end and
//! that the counts the bench derives from the database add up: each intent
//! is inserted once, the idle phase's work reaches its final states and its
//! node's leases are taken over. A phase whose wait can never end (a state
//! count that misses its rows) fails here on its deadline.

use std::{path::PathBuf, process::Command};

use serde_json::Value;

/// The `txmgr` binary the idle phase starts: the workspace's, built beside
/// this package's (the `txmgr` package has integration tests, so a test
/// build of the workspace builds it).
fn txmgr_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_txmgr-bench")).with_file_name("txmgr")
}

/// Runs `txmgr-bench` with `args` plus `--txmgr <the workspace's binary>
/// --json`; fails unless it succeeds, and returns its report.
fn bench_report(args: &[&str]) -> Value {
    let txmgr = txmgr_bin();
    assert!(
        txmgr.is_file(),
        "{} missing: build the workspace's tests (cargo nextest run --workspace)",
        txmgr.display()
    );
    let output = Command::new(env!("CARGO_BIN_EXE_txmgr-bench"))
        .args(args)
        .arg("--txmgr")
        .arg(&txmgr)
        .arg("--json")
        .output()
        .expect("txmgr-bench starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "txmgr-bench failed: {stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("--json is not JSON ({e}); stderr: {stderr}"))
}

fn number(report: &Value, pointer: &str) -> f64 {
    report
        .pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} missing from the report: {report:#}"))
}

#[test]
fn a_small_run_of_every_closed_loop_phase_and_the_idle_phase_completes() {
    let report = bench_report(&[
        "-n",
        "40",
        "-c",
        "8",
        "--submitters",
        "4",
        "--batch-size",
        "8",
        "--phases",
        "raw,one,many,idle",
        "--tracking-timeout",
        "120s",
        "--deadline",
        "10m",
        "--idle-submitters",
        "12",
        "--idle-used",
        "3",
        "--idle-window",
        "2s",
        "--idle-ready-timeout",
        "2m",
        // The history phase on a small history, with its retention run and
        // a short soak (blocks mined, retention sweeping, pgstattuple).
        "--history",
        "3000",
        "--history-retention",
        "--soak",
        "3s",
        "--soak-rate",
        "20",
    ]);

    assert_eq!(number(&report, "/raw_one/count"), 40.0);
    // One submitter, batches of 8: its sends go out as JSON-RPC batches.
    let one = number(&report, "/one/rpc_requests_per_intent");
    assert!(one < 0.5, "/one: {one} requests per intent, batched sends");
    assert!(number(&report, "/raw_one/tx_per_s") > 0.0);
    for phase in ["/one", "/many/0"] {
        assert_eq!(number(&report, &format!("{phase}/count")), 40.0);
        assert!(number(&report, &format!("{phase}/acks_per_s")) > 0.0);
        assert!(number(&report, &format!("{phase}/ratio_vs_raw")) > 0.0);
        // At most one send request per intent (a leader's batch is one
        // JSON-RPC batch request): nothing is mined, nothing resent.
        let requests = number(&report, &format!("{phase}/rpc_requests_per_intent"));
        assert!(
            requests > 0.0 && requests < 1.5,
            "{phase}: {requests} requests per intent"
        );
        let send_calls: f64 = report
            .pointer(&format!("{phase}/chain_calls"))
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{phase}: no chain calls: {report:#}"))
            .iter()
            .filter(|c| matches!(c["method"].as_str(), Some("send_raw" | "send_raw_batch")))
            .filter_map(|c| c["calls"].as_f64())
            .sum();
        assert!(
            (1.0..=40.0).contains(&send_calls),
            "{phase}: {send_calls} send requests for 40 intents"
        );
        let tables = report
            .pointer(&format!("{phase}/row_versions/tables"))
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{phase}: no row version tables: {report:#}"));
        let managed = tables
            .iter()
            .find(|t| t["table"] == "managed_tx")
            .unwrap_or_else(|| panic!("{phase}: managed_tx not counted: {report:#}"));
        assert_eq!(
            managed["inserts_per_intent"].as_f64(),
            Some(1.0),
            "{phase}: each intent is inserted once: {managed:#}"
        );
    }
    assert_eq!(number(&report, "/many/0/submitters"), 4.0);

    // The history phase: loaded, measured, and retention removed the oldest
    // of its 31 days while "many" ran again; the soak read the hot tables.
    assert_eq!(number(&report, "/history/0/intents"), 3000.0);
    assert!(number(&report, "/history/0/bytes_per_intent") > 1000.0);
    assert!(number(&report, "/history/0/many/0/e2e_tx_per_s") > 0.0);
    assert!(number(&report, "/history/0/retention/removed_intents") > 0.0);
    assert!(number(&report, "/history/0/soak/ack/accepted") > 0.0);
    let soak_tables = report
        .pointer("/history/0/soak/tables")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no soak tables: {report:#}"));
    assert!(soak_tables.iter().any(|t| t["relation"] == "managed_tx"));

    // The idle phase: its used submitters' work became final, nothing is
    // left open once settled, and the second node took every lease over.
    assert_eq!(number(&report, "/idle/submitters"), 12.0);
    assert_eq!(number(&report, "/idle/used"), 3.0);
    assert!(number(&report, "/idle/work_to_final_ms") > 0.0);
    assert_eq!(number(&report, "/idle/settled/open_intents"), 0.0);
    assert!(number(&report, "/idle/before_work/rss_mib") > 0.0);
    assert!(number(&report, "/idle/failover/leases_of_a") >= 1.0);
    let taken = number(&report, "/idle/failover/all_taken_s");
    let bound = number(&report, "/idle/failover/bound_s");
    assert!(
        taken <= bound,
        "take-over {taken} s past its bound {bound} s"
    );
}

/// `--daemon` apart from the run above, so the two share the suite's
/// threads: phase "one" in process, then against `txmgr run` processes with
/// every trace exported and with bearer tokens (`plain` is the same pass
/// without either; each pass costs a phase's two statistics waits).
#[test]
fn the_daemon_passes_with_tracing_and_with_tokens_complete() {
    let report = bench_report(&[
        "-n",
        "40",
        "-c",
        "8",
        "--batch-size",
        "8",
        "--phases",
        "one",
        "--tracking-timeout",
        "120s",
        "--deadline",
        "10m",
        "--daemon",
        "--daemon-variants",
        "tracing,token",
    ]);

    // Each variant's process took every create (the token pass's with its
    // client token) and its CPU was read apart from the bench's.
    for (i, variant) in ["tracing", "token"].iter().enumerate() {
        let pass = format!("/daemon/{i}");
        assert_eq!(
            report.pointer(&format!("{pass}/variant")),
            Some(&Value::from(*variant))
        );
        assert_eq!(number(&report, &format!("{pass}/one/count")), 40.0);
        assert!(number(&report, &format!("{pass}/one/cpu/daemon_ms_per_tx")) > 0.0);
    }
    // The tracing pass's spans reached the collector, none dropped.
    assert!(number(&report, "/daemon/0/traces/requests") > 0.0);
    assert!(number(&report, "/daemon/0/traces/spans_exported") > 0.0);
    assert_eq!(number(&report, "/daemon/0/traces/spans_dropped"), 0.0);
}
