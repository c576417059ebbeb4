//! CPU time spent per phase by each party — this process (client, HTTP
//! server and engine; the client alone when a `txmgr run` process is under
//! test, which is then counted apart), anvil, and the PostgreSQL backends
//! serving the bench database — read from `/proc` (Linux only; elsewhere
//! nothing is reported).
//!
//! On a shared 2-core machine wall time moves with other load; CPU seconds
//! per intent do not, so they say where the work is.

use std::collections::HashMap;

use serde::Serialize;

use crate::node::BenchDb;

/// `/proc/<pid>/stat` counts in USER_HZ, which is 100 on every Linux ABI.
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds of each party at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuSample {
    bench: f64,
    anvil: f64,
    /// A `txmgr run` process under test, when there is one.
    daemon: Option<f64>,
    postgres: HashMap<i32, f64>,
}

/// CPU milliseconds per transaction over a phase.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CpuCost {
    /// This process: HTTP client, axum, engine (or the raw sender).
    pub(crate) bench_ms_per_tx: f64,
    /// anvil (every anvil of the phase).
    pub(crate) anvil_ms_per_tx: f64,
    /// PostgreSQL backends connected to the bench database.
    pub(crate) postgres_ms_per_tx: f64,
    /// The `txmgr run` process under test (phase rows `txmgr run`; then
    /// `bench_ms_per_tx` is the HTTP client alone).
    pub(crate) daemon_ms_per_tx: Option<f64>,
}

impl CpuSample {
    /// Reads the counters now: the anvils are `anvil_pids` (summed), the
    /// backends those of `db`, if given.
    pub(crate) async fn take(anvil_pids: &[u32], db: Option<&BenchDb>) -> CpuSample {
        Self::take_with_daemon(anvil_pids, db, None).await
    }

    /// [`CpuSample::take`], and the `txmgr run` process `daemon_pid`.
    pub(crate) async fn take_with_daemon(
        anvil_pids: &[u32],
        db: Option<&BenchDb>,
        daemon_pid: Option<u32>,
    ) -> CpuSample {
        let mut postgres = HashMap::new();
        if let Some(db) = db {
            for pid in db.backend_pids().await {
                if let Some(secs) = process_cpu(&pid.to_string()) {
                    postgres.insert(pid, secs);
                }
            }
        }
        CpuSample {
            bench: process_cpu("self").unwrap_or(0.0),
            anvil: anvil_pids
                .iter()
                .filter_map(|pid| process_cpu(&pid.to_string()))
                .sum(),
            postgres,
            daemon: daemon_pid.and_then(|pid| process_cpu(&pid.to_string())),
        }
    }

    /// Cost from `before` to `self` per transaction. A backend born during
    /// the phase counts from zero; one that exited during it is missed.
    pub(crate) fn since(&self, before: &CpuSample, transactions: usize) -> CpuCost {
        let per_tx = 1000.0 / transactions.max(1) as f64;
        let postgres: f64 = self
            .postgres
            .iter()
            .map(|(pid, now)| now - before.postgres.get(pid).copied().unwrap_or(0.0))
            .sum();
        CpuCost {
            bench_ms_per_tx: (self.bench - before.bench) * per_tx,
            anvil_ms_per_tx: (self.anvil - before.anvil) * per_tx,
            postgres_ms_per_tx: postgres * per_tx,
            daemon_ms_per_tx: self
                .daemon
                .zip(before.daemon)
                .map(|(now, then)| (now - then) * per_tx),
        }
    }
}

/// utime + stime of `/proc/<pid>/stat`, in seconds.
pub(crate) fn process_cpu(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; fields resume after its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}
