//! The history phase's lines of the report, each figure next to the same
//! phase on the run's empty database.

use crate::{
    history::HistoryRun,
    report::{AckPhase, TxmgrPhase},
};

impl HistoryRun {
    /// Prints this size next to the empty database's figures.
    pub(crate) fn print(&self, empty_phases: &[&TxmgrPhase], empty_ack: Option<&AckPhase>) {
        println!(
            "\nhistory: {} final intents loaded in {:.0} s; {:.0} bytes per intent \
             (managed_tx + tx_attempt + tx_completion + ops_audit); database {:.2} × memory; \
             shared_buffers {}{}",
            self.intents,
            self.load_s,
            self.bytes_per_intent,
            self.database_vs_memory,
            self.shared_buffers,
            if self.caches_dropped {
                "; OS page cache dropped before the phases"
            } else {
                ""
            }
        );
        if let Some((name, bytes)) = &self.largest_index {
            println!("  largest index: {name} ({} MB)", bytes / (1024 * 1024));
        }
        for t in self.tables.iter().filter(|t| t.rows > 0) {
            println!(
                "  {:<22} rows {:>11}  heap {:>6} MB  toast {:>5} MB  indexes {:>6} MB{}",
                t.table,
                t.rows,
                t.heap_bytes / (1024 * 1024),
                t.toast_bytes / (1024 * 1024),
                t.index_bytes / (1024 * 1024),
                t.largest_index
                    .as_ref()
                    .map(|(n, b)| format!("  (largest {n}: {} MB)", b / (1024 * 1024)))
                    .unwrap_or_default()
            );
        }
        let cpu = |p: &TxmgrPhase| p.cpu.bench_ms_per_tx + p.cpu.postgres_ms_per_tx;
        let again: Vec<&TxmgrPhase> = self
            .empty_again
            .iter()
            .flat_map(|a| a.one.iter().chain(&a.many))
            .collect();
        let baseline = if again.is_empty() {
            "empty"
        } else {
            "empty, mean of before and after"
        };
        for phase in self.one.iter().chain(&self.many) {
            let same = |p: &&&TxmgrPhase| p.submitters == phase.submitters;
            let before = empty_phases.iter().find(same).copied();
            let after = again.iter().find(same).copied();
            // The empty database's figure: the mean of the runs before and
            // after this size's when both exist.
            let base = |figure: fn(&TxmgrPhase) -> f64| -> Option<f64> {
                let values: Vec<f64> = before.iter().chain(&after).map(|p| figure(p)).collect();
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
            };
            let ratio = |a: f64, b: Option<f64>| {
                b.filter(|b| *b > 0.0)
                    .map_or("-".to_owned(), |b| format!("{:.2}", a / b))
            };
            println!(
                "  {} submitters: {:.0} tx/s ({} × {baseline}), bench+pg CPU {:.3} ms/intent ({} ×), \
                 ack p99 {:.1} ms ({} ×), WAL {:.0} B/intent ({} ×)",
                phase.submitters,
                phase.e2e_tx_per_s,
                ratio(phase.e2e_tx_per_s, base(|p| p.e2e_tx_per_s)),
                cpu(phase),
                ratio(cpu(phase), base(cpu)),
                phase.ack_latency.p99_ms,
                ratio(phase.ack_latency.p99_ms, base(|p| p.ack_latency.p99_ms)),
                phase.wal_bytes_per_intent,
                ratio(phase.wal_bytes_per_intent, base(|p| p.wal_bytes_per_intent)),
            );
            if !phase.wal_by_relation.is_empty() {
                println!(
                    "    WAL by relation: {}",
                    crate::wal_relations::summary(&phase.wal_by_relation)
                );
            }
            if let Some(empty) = before.filter(|p| !p.wal_by_relation.is_empty()) {
                println!(
                    "    WAL by relation, the empty database before: {}",
                    crate::wal_relations::summary(&empty.wal_by_relation)
                );
            }
            if let (Some(before), Some(after)) = (before, after) {
                println!(
                    "    the empty database before / after: {:.0} / {:.0} tx/s, CPU {:.3} / {:.3} ms, \
                     ack p99 {:.1} / {:.1} ms, WAL {:.0} / {:.0} B",
                    before.e2e_tx_per_s,
                    after.e2e_tx_per_s,
                    cpu(before),
                    cpu(after),
                    before.ack_latency.p99_ms,
                    after.ack_latency.p99_ms,
                    before.wal_bytes_per_intent,
                    after.wal_bytes_per_intent,
                );
            }
        }
        if let (Some(ack), Some(empty)) = (&self.ack, empty_ack) {
            let after = self.empty_again.as_ref().and_then(|a| a.ack.as_ref());
            println!(
                "  open-loop creates at {:.0}/s: ack p99 {:.1} ms (empty {:.1} ms{})",
                ack.rate_per_s,
                ack.ack_latency.p99_ms,
                empty.ack_latency.p99_ms,
                after.map_or(String::new(), |a| format!(
                    ", after {:.1} ms",
                    a.ack_latency.p99_ms
                ))
            );
        }
        for phase in &self.cold {
            let warm = self
                .one
                .iter()
                .chain(&self.many)
                .find(|p| p.submitters == phase.submitters);
            println!(
                "  page cache dropped: {} submitters {:.0} tx/s ({} × warm), bench+pg CPU {:.3} ms/intent, ack p99 {:.1} ms",
                phase.submitters,
                phase.e2e_tx_per_s,
                warm.map_or("-".to_owned(), |w| format!(
                    "{:.2}",
                    phase.e2e_tx_per_s / w.e2e_tx_per_s.max(1e-9)
                )),
                cpu(phase),
                phase.ack_latency.p99_ms,
            );
        }
        if let Some(soak) = &self.soak {
            println!(
                "  soak: {:.0} s at {:.0} creates/s (ack p99 {:.1} ms); {} confirmed, {} old intents removed by retention",
                soak.seconds,
                soak.ack.rate_per_s,
                soak.ack.ack_latency.p99_ms,
                soak.confirmed,
                soak.removed_intents
            );
            if !soak.autovacuum {
                println!(
                    "  autovacuum is off on this server (SHOW autovacuum): nothing below was vacuumed"
                );
            }
            for b in &soak.tables {
                if b.live_rows > 0 || b.dead_rows > 0 || b.autovacuums > 0 {
                    println!(
                        "    {:<28} live {:>10} dead {:>8} autovacuums {:>2}  dead {:>5.1} %  free {:>5.1} %  {:>6} MB",
                        b.relation, b.live_rows, b.dead_rows, b.autovacuums, b.dead_percent,
                        b.free_percent, b.bytes / (1024 * 1024)
                    );
                } else {
                    println!(
                        "    {:<28} index: empty leaf space {:>5.1} %  leaf fragmentation {:>5.1} %  {:>6} MB",
                        b.relation, b.dead_percent, b.free_percent, b.bytes / (1024 * 1024)
                    );
                }
            }
        }
        if let Some(r) = &self.retention {
            for phase in &r.many {
                let plain = self
                    .one
                    .iter()
                    .chain(&self.many)
                    .find(|p| p.submitters == phase.submitters);
                println!(
                    "  while retention deleted ({} intents in {} rounds, {:.0}/s): {} submitters \
                     {:.0} tx/s ({} × without), bench+pg CPU {:.3} ms/intent",
                    r.removed_intents,
                    r.rounds,
                    r.removed_per_s,
                    phase.submitters,
                    phase.e2e_tx_per_s,
                    plain.map_or("-".to_owned(), |p| format!(
                        "{:.2}",
                        phase.e2e_tx_per_s / p.e2e_tx_per_s.max(1e-9)
                    )),
                    cpu(phase),
                );
            }
        }
    }
}
