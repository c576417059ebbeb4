//! The help text and unit of every metric of [`super`], for the exporter's
//! `# HELP` and `# TYPE` lines.

use super::*;

/// Registers the help text (and unit) of every metric above with the
/// installed recorder, so each is exposed with `# HELP` and `# TYPE` lines.
/// Call once after installing the recorder; metrics recorded before still
/// get their description.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        SIGNER_REQUESTS,
        Unit::Count,
        "Signatures asked of a signer, by kind and result (ok, unavailable, refused)."
    );
    describe_histogram!(
        SIGNER_LATENCY,
        Unit::Seconds,
        "Seconds per signature, by signer kind."
    );
    describe_gauge!(
        BUILD_INFO,
        Unit::Count,
        "1, labelled with the release (version) and the commit this node runs."
    );
    describe_gauge!(
        PKCS11_SESSIONS_OPEN,
        Unit::Count,
        "Logged-in sessions open on a PKCS#11 module (idle or signing), at most its max_sessions."
    );
    describe_counter!(
        PKCS11_SESSIONS_OPENED,
        Unit::Count,
        "Sessions opened on a PKCS#11 module (climbs when a token goes away or drops sessions)."
    );
    describe_counter!(
        WEBHOOK_LEASES,
        Unit::Count,
        "Webhook lease attempts by webhook and result (acquired, renewed, not_owner, released)."
    );
    describe_counter!(
        WEBHOOK_ATTEMPTS,
        Unit::Count,
        "Webhook delivery attempts by webhook and result (delivered, retry, refused)."
    );
    describe_histogram!(
        WEBHOOK_ATTEMPT_SECONDS,
        Unit::Seconds,
        "Seconds per webhook HTTP attempt."
    );
    describe_histogram!(
        WEBHOOK_DELIVERY_DELAY,
        Unit::Seconds,
        "Seconds from an event's commit to its delivery (2xx)."
    );
    describe_counter!(
        WEBHOOK_DEAD_LETTERS,
        Unit::Count,
        "Webhook events given up on (max_attempts reached or refused with a 4xx)."
    );
    describe_gauge!(
        WEBHOOK_LAG_EVENTS,
        Unit::Count,
        "Feed events after a webhook's durable cursor (from the database)."
    );
    describe_gauge!(
        WEBHOOK_LAG_SECONDS,
        Unit::Seconds,
        "Age of the oldest feed event after a webhook's cursor."
    );
    describe_gauge!(
        WEBHOOK_DEAD_LETTERS_OPEN,
        Unit::Count,
        "A webhook's dead letters not redelivered."
    );
    describe_gauge!(
        WEBHOOK_PENDING,
        Unit::Count,
        "Events read and not yet delivered or dead-lettered by this node's webhook holder."
    );
    describe_gauge!(
        SUBMITTER_BALANCE,
        "A submitter's last balance read, in wei."
    );
    describe_counter!(
        FUNDS_EVENTS,
        Unit::Count,
        "Funds events recorded (low_balance, balance_restored)."
    );
    describe_counter!(
        TOP_UPS,
        Unit::Count,
        "Top-ups of low submitters by result (sent, capped)."
    );
    describe_counter!(LEASE_ACQUISITIONS, Unit::Count, "Lease acquisition attempts by result (acquired, renewed, taken_over, not_owner, released, handed_over, lost, idle_released).");
    describe_counter!(
        LEASE_RENEW_STATEMENTS,
        Unit::Count,
        "Statements renewing all of this node's leases at once."
    );
    describe_gauge!(
        LEASES_HELD,
        Unit::Count,
        "Leases this node holds and renews."
    );
    describe_counter!(
        LEASE_HANDOVERS,
        Unit::Count,
        "Leases handed to their preferred node by lease balancing."
    );
    describe_counter!(
        FENCED_WRITES,
        Unit::Count,
        "Fenced transactions by operation and result (ok, fenced, error)."
    );
    describe_counter!(
        BROADCASTS,
        Unit::Count,
        "eth_sendRawTransaction outcomes by broadcast class."
    );
    describe_counter!(
        EXTERNAL_NONCE,
        Unit::Count,
        "External use of a submitter's key detected, by action (adopt, protect)."
    );
    describe_counter!(
        REORGS,
        Unit::Count,
        "Chain reorganisations detected by the head watcher."
    );
    describe_counter!(
        FINALITY_VIOLATIONS,
        Unit::Count,
        "Final intents whose block left the canonical chain (reorg deeper than finality); each is re-opened."
    );
    describe_counter!(
        RECEIPT_CHECKS,
        Unit::Count,
        "Receipt lookups by method (block_receipts, by_hash)."
    );
    describe_counter!(
        RESUBMITS,
        Unit::Count,
        "Resubmissions by kind (rebroadcast, bump, cancel)."
    );
    describe_counter!(STUCK, Unit::Count, "Intents that became STUCK, by reason.");
    describe_counter!(
        ACTOR_RESTARTS,
        Unit::Count,
        "Actors restarted after a failure, by actor: a chain's tracking actors (by its supervisor) and chain supervisors (by the node's root)."
    );
    describe_counter!(
        TLS_REFUSED,
        Unit::Count,
        "HTTPS connections closed before their handshake, by reason (busy, per_peer: shed as the oldest pending; timeout)."
    );
    describe_counter!(
        FILLERS,
        Unit::Count,
        "Fillers made for released nonces below allocated ones."
    );
    describe_counter!(
        PRESIGN_CONFLICTS,
        Unit::Count,
        "Drawn and signed batches whose draw no longer held at their write (discarded, never sent)."
    );
    describe_counter!(
        RELEASED_MINED,
        Unit::Count,
        "REJECTED intents (nonce released) that were mined after all."
    );
    describe_gauge!(
        HEAD_OF_LINE_BLOCKED,
        "1 while a submitter's lowest unmined nonce is STUCK."
    );
    describe_counter!(
        OPERATOR_ACTIONS,
        Unit::Count,
        "Operator actions on transactions (cancel, speedup, rebroadcast)."
    );
    describe_gauge!(
        SPEND_WINDOW,
        "Wei of value drawn in the submitter's rolling spend window."
    );
    describe_gauge!(SPEND_LIMIT, "The submitter's spend_limit value, wei.");
    describe_gauge!(
        SPEND_FEES_WINDOW,
        "Wei of fees counted in the submitter's rolling spend window: paid, or reserved until the receipt."
    );
    describe_gauge!(SPEND_FEES_LIMIT, "The submitter's spend_limit fees, wei.");
    describe_gauge!(
        SUBMITTER_NONCE_LAG,
        Unit::Count,
        "Nonces the submitter drew that the chain has not mined yet (next nonce - chain latest nonce)."
    );
    describe_gauge!(
        SUBMITTER_QUEUED,
        Unit::Count,
        "The submitter's QUEUED intents."
    );
    describe_gauge!(
        SUBMITTER_IN_FLIGHT,
        Unit::Count,
        "The submitter's intents holding a nonce (ALLOCATED, TRACKING, STUCK)."
    );
    describe_histogram!(
        GROUP_COMMIT_SECONDS,
        Unit::Seconds,
        "One group-commit transaction of the leaders' merged writes, begin to commit."
    );
    describe_gauge!(
        DB_POOL_CONNECTIONS,
        Unit::Count,
        "The node's database pool connections, in use or idle."
    );
    describe_counter!(
        COMPLETIONS,
        "Transactions completed (written to the feed), by final state."
    );
    describe_gauge!(
        SUBMITTER_MIN_BALANCE,
        "The submitter's min_balance, wei: its balance is low while below it."
    );
    describe_gauge!(
        CLUSTER_NODES,
        Unit::Count,
        "Registered nodes by heartbeat: live, or lost (heartbeat older than node.liveness)."
    );
    describe_gauge!(
        DATABASE_HEALTHY,
        "1 while the database answers the readiness round (reachable and migrated), else 0."
    );
    describe_histogram!(
        CREATE_ACK_SECONDS,
        Unit::Seconds,
        "POST /v1/transactions from the request to its answer."
    );
    describe_gauge!(
        SPEND_WAITING,
        Unit::Count,
        "Intents QUEUED waiting for room under the submitter's spend limit."
    );
    describe_counter!(
        POLICY_REFUSALS,
        Unit::Count,
        "Creates refused by the submitter's policy, by rule."
    );
    describe_counter!(
        CREATES,
        Unit::Count,
        "POST /v1/transactions answers by chain (none: refused before naming a served chain) and result (created, replayed or an error code)."
    );
    describe_gauge!(
        TRANSACTIONS,
        Unit::Count,
        "Open intents of this chain by state."
    );
    describe_gauge!(
        MAILBOX_DEPTH,
        Unit::Count,
        "Messages waiting, by kind (submitter mailboxes, ingress)."
    );
    describe_counter!(
        HISTORY_REMOVED,
        Unit::Count,
        "Rows history retention removed on this node, by table."
    );
    describe_counter!(
        HISTORY_ROUNDS,
        Unit::Count,
        "History retention rounds on this node, by result (ran, behind, skipped, failed)."
    );
    describe_gauge!(
        HISTORY_RETAIN,
        Unit::Seconds,
        "history.retain in seconds (0: every intent is kept)."
    );
    describe_gauge!(
        HISTORY_OLDEST_FINAL_AGE,
        Unit::Seconds,
        "Age of the oldest final intent still stored (cluster-wide)."
    );
    describe_gauge!(
        DB_TABLE_ROWS,
        Unit::Count,
        "Rows of each txmgr table (PostgreSQL's estimate)."
    );
    describe_gauge!(
        DB_TABLE_BYTES,
        Unit::Bytes,
        "Bytes of each txmgr table with its indexes and TOAST."
    );
    describe_gauge!(
        OLDEST_PENDING_AGE,
        Unit::Seconds,
        "Age of the oldest open intent of this chain."
    );
    describe_counter!(
        RPC_CALLS,
        Unit::Count,
        "JSON-RPC calls of the engine by method and result."
    );
    describe_gauge!(
        SUBMITTER_ROLES,
        Unit::Count,
        "Submitter actors on this node by role."
    );
    describe_counter!(
        RPC_ENDPOINT_CALLS,
        Unit::Count,
        "Calls per RPC endpoint by result (ok, error, unavailable)."
    );
    describe_histogram!(
        GROUP_COMMIT_PARTS,
        Unit::Count,
        "Leaders' write sets merged into one group-commit transaction."
    );
    describe_histogram!(
        RPC_ENDPOINT_LATENCY,
        Unit::Seconds,
        "Duration of one call to an RPC endpoint."
    );
    describe_gauge!(
        RPC_ENDPOINT_HEALTHY,
        "1 while an RPC endpoint serves reads and sends."
    );
    describe_gauge!(
        CHAIN_HEALTHY,
        "1 while the chain has a healthy read endpoint, 0 while it is out of service."
    );
    describe_gauge!(
        RPC_ENDPOINT_HEAD_LAG,
        Unit::Count,
        "Blocks an RPC endpoint's head is behind the best endpoint's."
    );
    describe_counter!(
        RPC_READ_SWITCHES,
        Unit::Count,
        "Times reads moved to another RPC endpoint."
    );
    describe_counter!(
        TRACE_SPANS_DROPPED,
        Unit::Count,
        "Trace spans not exported, by reason (queue_full, export_failed)."
    );
    describe_counter!(
        TRACE_SPANS_EXPORTED,
        Unit::Count,
        "Trace spans the OTLP collector accepted."
    );
}

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeSet,
        sync::{Arc, Mutex},
    };

    use metrics::{
        Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    /// Records only which names were described.
    #[derive(Default)]
    struct Described(Arc<Mutex<BTreeSet<String>>>);

    impl Described {
        fn add(&self, name: KeyName) {
            self.0
                .lock()
                .expect("test lock")
                .insert(name.as_str().to_owned());
        }
    }

    impl Recorder for Described {
        fn describe_counter(&self, name: KeyName, _: Option<Unit>, _: SharedString) {
            self.add(name);
        }
        fn describe_gauge(&self, name: KeyName, _: Option<Unit>, _: SharedString) {
            self.add(name);
        }
        fn describe_histogram(&self, name: KeyName, _: Option<Unit>, _: SharedString) {
            self.add(name);
        }
        fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
            Counter::noop()
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    /// Every metric name this file defines (read from its own source, so a
    /// new constant cannot be forgotten here) gets a description.
    #[test]
    fn every_metric_defined_here_is_described() {
        let defined: BTreeSet<String> = include_str!("mod.rs")
            .lines()
            .filter(|line| line.starts_with("pub const "))
            .filter_map(|line| line.split('"').nth(1))
            .filter(|name| name.starts_with("txmgr_"))
            .map(str::to_owned)
            .collect();
        assert!(defined.len() > 40, "{defined:?}");
        let recorder = Described::default();
        metrics::with_local_recorder(&recorder, super::describe);
        let described = recorder.0.lock().expect("test lock").clone();
        let missing: Vec<_> = defined.difference(&described).collect();
        assert!(missing.is_empty(), "not described: {missing:?}");
    }
}
