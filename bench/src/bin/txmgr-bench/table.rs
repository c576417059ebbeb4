//! The human-readable report: throughput, then cost per intent, then the
//! per-phase diagnostics and the idle phase.

use crate::report::{RawPhase, Report, TxmgrPhase};

/// One row of the two main tables.
struct Row<'a> {
    name: &'static str,
    raw: Option<&'a RawPhase>,
    txmgr: Option<&'a TxmgrPhase>,
}

impl Report {
    /// Prints the report as tables.
    pub(crate) fn print_table(&self) {
        println!(
            "txmgr-bench: n={} c={} batch_size={} gas_limit={} cpus={}{}",
            self.count,
            self.concurrency,
            self.batch_size,
            if self.fixed_gas_limit {
                "21000"
            } else {
                "estimated"
            },
            self.cpus,
            if self.async_commit {
                " synchronous_commit=off (DIAGNOSTIC: acks not durable)"
            } else {
                ""
            }
        );
        let rows = self.rows();
        println!(
            "{:<24} {:>5} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9}",
            "phase", "keys", "tx/s", "vs raw", "acks/s", "p50 ms", "p99 ms", "max ms"
        );
        for row in &rows {
            print_rate_row(row);
        }
        if let Some(a) = &self.ack {
            let l = &a.ack_latency;
            println!(
                "{:<24} {:>5} {:>9} {:>7} {:>9.0} {:>9.2} {:>9.2} {:>9.2}",
                "open-loop creates",
                a.submitters,
                "-",
                "-",
                a.rate_per_s,
                l.p50_ms,
                l.p99_ms,
                l.max_ms
            );
            println!(
                "open-loop creates: insert commit → TRACKING p50 {:.1} ms, p99 {:.1} ms",
                a.to_tracking_p50_ms, a.to_tracking_p99_ms
            );
        }
        println!(
            "(raw rows: sends/s and the latency of one send; txmgr rows: tx/s end to end \
             (first POST → all TRACKING), latency of the create ack)"
        );
        println!(
            "\n{:<24} {:>5} {:>22} {:>9} {:>10} {:>10} {:>10}",
            "cost per intent",
            "keys",
            "CPU ms bench/anvil/pg",
            "daemon",
            "DB tx",
            "RPC reqs",
            "chain calls"
        );
        for row in &rows {
            print_cost_row(row);
        }
        println!(
            "(CPU: this process (client + HTTP + engine, or the raw sender; the HTTP client alone \
             for `txmgr run` rows), anvil, PostgreSQL backends of the bench database, the \
             `txmgr run` process; DB tx: commits + rollbacks of the bench database; RPC reqs: \
             JSON-RPC requests; chain calls: calls of the engine's chain port (not counted \
             in a process))"
        );
        for phase in self.one.iter().chain(&self.many) {
            print_diagnostics(phase);
        }
        for phase in self.one_tls.iter().chain(&self.many_tls) {
            println!("\n(RPC over HTTPS)");
            print_diagnostics(phase);
        }
        for phase in self.one_spend.iter().chain(&self.many_spend) {
            println!("\n(under a spend limit)");
            print_diagnostics(phase);
        }
        if let Some(phase) = &self.one_pkcs11 {
            println!("\n(signed in SoftHSM2 over PKCS#11)");
            print_diagnostics(phase);
        }
        for pass in &self.daemon {
            for phase in pass.phases() {
                println!("\n({})", pass.variant.row_name());
                print_diagnostics(phase);
            }
            if let Some(t) = &pass.traces {
                println!(
                    "\n(tracing: the collector took {} exports, {} bytes; the daemon counted \
                     {:.0} spans exported, {:.0} dropped)",
                    t.requests, t.bytes, t.spans_exported, t.spans_dropped
                );
            }
        }
        if let Some(idle) = &self.idle {
            idle.print();
        }
        if let Some(webhooks) = &self.webhooks {
            webhooks.print();
        }
        if let Some(signers) = &self.signers {
            signers.print();
        }
        if let Some(chains) = &self.chains {
            chains.print();
        }
        let empty: Vec<&TxmgrPhase> = self.one.iter().chain(&self.many).collect();
        for run in &self.history {
            run.print(&empty, self.ack.as_ref());
        }
    }

    /// Rows grouped by key count: raw, then txmgr, then txmgr over HTTPS,
    /// then txmgr under a spend limit.
    fn rows(&self) -> Vec<Row<'_>> {
        let mut keys: Vec<usize> = self
            .raw_one
            .iter()
            .chain(&self.raw_many)
            .map(|r| r.keys)
            .chain(
                self.one
                    .iter()
                    .chain(&self.many)
                    .chain(&self.one_tls)
                    .chain(&self.many_tls)
                    .chain(&self.one_spend)
                    .chain(&self.many_spend)
                    .chain(&self.one_pkcs11)
                    .chain(self.daemon.iter().flat_map(|pass| pass.phases()))
                    .map(|p| p.submitters),
            )
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut rows = Vec::new();
        for k in keys {
            if let Some(raw) = self
                .raw_one
                .iter()
                .chain(&self.raw_many)
                .find(|r| r.keys == k)
            {
                rows.push(Row {
                    name: "raw eth_sendRawTx",
                    raw: Some(raw),
                    txmgr: None,
                });
            }
            let plain = self
                .one
                .iter()
                .chain(&self.many)
                .find(|p| p.submitters == k);
            if let Some(p) = plain {
                rows.push(Row {
                    name: "txmgr HTTP→TRACKING",
                    raw: None,
                    txmgr: Some(p),
                });
            }
            let tls = self
                .one_tls
                .iter()
                .chain(&self.many_tls)
                .find(|p| p.submitters == k);
            if let Some(p) = tls {
                rows.push(Row {
                    name: "txmgr, RPC over HTTPS",
                    raw: None,
                    txmgr: Some(p),
                });
            }
            let limited = self
                .one_spend
                .iter()
                .chain(&self.many_spend)
                .find(|p| p.submitters == k);
            if let Some(p) = limited {
                rows.push(Row {
                    name: "txmgr, spend limit",
                    raw: None,
                    txmgr: Some(p),
                });
            }
            for pass in &self.daemon {
                if let Some(p) = pass.phases().find(|p| p.submitters == k) {
                    rows.push(Row {
                        name: pass.variant.row_name(),
                        raw: None,
                        txmgr: Some(p),
                    });
                }
            }
            if let Some(p) = self.one_pkcs11.iter().find(|p| p.submitters == k) {
                rows.push(Row {
                    name: "txmgr, pkcs11 SoftHSM2",
                    raw: None,
                    txmgr: Some(p),
                });
            }
        }
        rows
    }
}

fn print_rate_row(row: &Row<'_>) {
    if let Some(raw) = row.raw {
        let l = &raw.send_latency;
        println!(
            "{:<24} {:>5} {:>9.0} {:>7} {:>9} {:>9.2} {:>9.2} {:>9.2}",
            row.name, raw.keys, raw.tx_per_s, "1.00", "-", l.p50_ms, l.p99_ms, l.max_ms
        );
    }
    if let Some(p) = row.txmgr {
        let l = &p.ack_latency;
        let ratio = p.ratio_vs_raw.map_or("-".to_owned(), |r| format!("{r:.2}"));
        println!(
            "{:<24} {:>5} {:>9.0} {:>7} {:>9.0} {:>9.2} {:>9.2} {:>9.2}",
            row.name,
            p.submitters,
            p.e2e_tx_per_s,
            ratio,
            p.acks_per_s,
            l.p50_ms,
            l.p99_ms,
            l.max_ms
        );
    }
}

fn print_cost_row(row: &Row<'_>) {
    if let Some(raw) = row.raw {
        let cpu = format!(
            "{:.3}/{:.3}/-",
            raw.cpu.bench_ms_per_tx, raw.cpu.anvil_ms_per_tx
        );
        println!(
            "{:<24} {:>5} {:>22} {:>9} {:>10} {:>10.3} {:>10}",
            row.name, raw.keys, cpu, "-", "-", 1.0, "-"
        );
    }
    if let Some(p) = row.txmgr {
        let cpu = format!(
            "{:.3}/{:.3}/{:.3}",
            p.cpu.bench_ms_per_tx, p.cpu.anvil_ms_per_tx, p.cpu.postgres_ms_per_tx
        );
        let daemon = p
            .cpu
            .daemon_ms_per_tx
            .map_or("-".to_owned(), |ms| format!("{ms:.3}"));
        let or_dash = |value: f64| {
            if value.is_nan() {
                "-".to_owned()
            } else {
                format!("{value:.3}")
            }
        };
        println!(
            "{:<24} {:>5} {:>22} {:>9} {:>10.2} {:>10} {:>10}",
            row.name,
            p.submitters,
            cpu,
            daemon,
            p.db_transactions_per_intent,
            or_dash(p.rpc_requests_per_intent),
            or_dash(p.chain_calls_per_intent)
        );
    }
}

fn print_diagnostics(p: &TxmgrPhase) {
    let s = &p.pipeline;
    println!(
        "\n{} submitter(s): warm-up {:.0} ms; {} ingress commits, {} broadcast batches \
         (mean {:.1} intents), insert→TRACKING p50 {:.1} ms p99 {:.1} ms; ack phase {:.0} ms, \
         e2e {:.0} ms; {} DB transactions",
        p.submitters,
        p.warm_up_ms,
        s.ingress_commits,
        s.broadcast_commits,
        s.mean_batch,
        s.queue_to_tracking_p50_ms,
        s.queue_to_tracking_p99_ms,
        p.ack_elapsed_ms,
        p.e2e_ms,
        p.db_transactions
    );
    let rows = &p.row_versions;
    println!(
        "  row versions per intent {:.2} (HOT {:.0}% of updates), WAL {:.0} bytes per intent:",
        rows.per_intent,
        rows.hot_ratio * 100.0,
        p.wal_bytes_per_intent
    );
    for t in &rows.tables {
        println!(
            "    {:<22} ins {:>5.2}  upd {:>5.2} (HOT {:>3.0}%)  del {:>5.2}",
            t.table,
            t.inserts_per_intent,
            t.updates_per_intent,
            t.hot_ratio * 100.0,
            t.deletes_per_intent
        );
    }
    println!(
        "  {:<14} {:>8} {:>10} {:>10} {:>9}",
        "chain call", "calls", "per intent", "RPC/intent", "mean ms"
    );
    for c in &p.chain_calls {
        println!(
            "  {:<14} {:>8} {:>10.3} {:>10.3} {:>9.2}",
            c.method, c.calls, c.per_intent, c.rpc_per_intent, c.mean_ms
        );
    }
}
