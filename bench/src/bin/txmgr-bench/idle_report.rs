//! What the idle phase measured, and how it is printed.

use serde::Serialize;

use crate::daemon::ReadyTimes;

/// One idle window of the daemon.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdleSample {
    /// Window length actually measured, in seconds.
    pub(crate) window_s: f64,
    /// Open intents of the node's submitters when the window started (0 =
    /// idle; always 0 here, the bench waits for it).
    pub(crate) open_intents: usize,
    /// Resident set size at the start of the window, MiB.
    pub(crate) rss_start_mib: f64,
    /// Resident set size at the end of the window, MiB.
    pub(crate) rss_mib: f64,
    /// Transactions of the daemon's database per second over the window
    /// (`pg_stat_database` commits + rollbacks).
    pub(crate) db_transactions_per_s: f64,
    /// The daemon's CPU over the window, percent of one core.
    pub(crate) cpu_percent: f64,
    /// CPU of the PostgreSQL backends of the daemon's database, percent of
    /// one core.
    pub(crate) postgres_cpu_percent: f64,
    /// Chain-port calls per second (`txmgr_rpc_calls_total`).
    pub(crate) chain_calls_per_s: f64,
}

/// The fail-over step: SIGKILL of node A while it leads the used
/// submitters, each with one unmined intent.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdleFailover {
    /// Node B's start until ready (it runs next to A).
    pub(crate) b_ready: ReadyTimes,
    /// Live leases held by A when it was killed.
    pub(crate) leases_of_a: usize,
    /// Of them, submitters with open intents: those B must take over (a
    /// node starts a submitter only for work; a lease without work is
    /// taken by the first create).
    pub(crate) with_open_work: usize,
    /// Kill → the first of them held by B, seconds.
    pub(crate) first_taken_s: f64,
    /// Kill → all of them held by B, seconds.
    pub(crate) all_taken_s: f64,
    /// `lease.duration` + `lease.clock_skew_allowance`, seconds: the
    /// fail-over bound.
    pub(crate) bound_s: f64,
    /// `node.discovery_interval`, seconds: B looks for free work this often,
    /// so a take-over may come up to this much after the bound.
    pub(crate) discovery_interval_s: f64,
}

/// Phase "idle".
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdlePhase {
    /// Chains configured on each daemon (every submitter on each).
    pub(crate) chains: usize,
    /// Submitters configured on each daemon.
    pub(crate) submitters: usize,
    /// Submitters that got work.
    pub(crate) used: usize,
    /// Node A's start until ready.
    pub(crate) ready: ReadyTimes,
    /// Idle, before any work.
    pub(crate) before_work: IdleSample,
    /// One intent per used submitter: first POST → all CONFIRMED (mining a
    /// block every 250 ms), milliseconds.
    pub(crate) work_to_final_ms: f64,
    /// Idle again after the work was final; holds the leaders' idle linger
    /// and their lease releases.
    pub(crate) after_work: IdleSample,
    /// The window after that: the steady idle state, the figure that matters.
    pub(crate) settled: IdleSample,
    /// The fail-over step (absent with `--idle-no-failover`).
    pub(crate) failover: Option<IdleFailover>,
}

impl IdlePhase {
    /// The idle section of the table.
    pub(crate) fn print(&self) {
        let r = &self.ready;
        println!(
            "\nidle daemon: {} chain(s) × {} submitters configured, {} used",
            self.chains, self.submitters, self.used
        );
        println!(
            "  node A start → first HTTP answer {:.0} ms, /readyz 200 {:.0} ms, \
             ready (readyz 200 + all submitters in /v1/ops/actors) {:.0} ms",
            r.http_ms, r.readyz_ms, r.ready_ms
        );
        println!(
            "  {:<26} {:>8} {:>9} {:>10} {:>9} {:>9} {:>11}",
            "", "window s", "RSS MiB", "DB tx/s", "CPU %", "PG CPU %", "chain/s"
        );
        for (name, s) in [
            ("idle, before any work", &self.before_work),
            ("idle, after work (final)", &self.after_work),
            ("idle, one window later", &self.settled),
        ] {
            println!(
                "  {:<26} {:>8.1} {:>9.1} {:>10.1} {:>9.1} {:>9.1} {:>11.2}",
                name,
                s.window_s,
                s.rss_mib,
                s.db_transactions_per_s,
                s.cpu_percent,
                s.postgres_cpu_percent,
                s.chain_calls_per_s
            );
        }
        println!(
            "  work: 1 intent × {} submitters, first POST → all CONFIRMED {:.0} ms",
            self.used, self.work_to_final_ms
        );
        if let Some(f) = &self.failover {
            println!(
                "  fail-over: node B ready in {:.0} ms; SIGKILL A holding {} leases ({} with open \
                 work); B held the first after {:.2} s, all after {:.2} s \
                 (bound: lease + skew = {:.1} s, discovery every {:.1} s)",
                f.b_ready.ready_ms,
                f.leases_of_a,
                f.with_open_work,
                f.first_taken_s,
                f.all_taken_s,
                f.bound_s,
                f.discovery_interval_s
            );
        }
    }
}
