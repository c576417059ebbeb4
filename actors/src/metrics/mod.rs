//! Names of the metrics the engine records (prefix `txmgr_`, README "Operations").
//!
//! The engine records through the `metrics` facade; the daemon installs the
//! Prometheus exporter. Label values are bounded (results, operations), never
//! per-transaction. Every series carries a `chain` label, the chain's name
//! ([`chain_label`]), except those of the node as a whole ([`NODE_LEVEL`]).

use crate::domain::SubState;

mod chain_label;
mod describe;
pub use chain_label::{chain_label, name_chain};
pub use describe::describe;

/// Counter: lease acquisition attempts, label `result` =
/// `acquired` | `renewed` | `taken_over` | `not_owner` | `released` |
/// `handed_over` | `lost` (not renewed by the node's batch renewal) |
/// `idle_released` (given up by an idle leader).
pub const LEASE_ACQUISITIONS: &str = "txmgr_lease_acquisitions_total";

/// Counter: statements of the node's lease keeper, each renewing every lease
/// the node holds (one per renew interval while it holds any, none otherwise).
pub const LEASE_RENEW_STATEMENTS: &str = "txmgr_lease_renew_statements_total";

/// Gauge: leases this node's lease keeper renews.
pub const LEASES_HELD: &str = "txmgr_leases_held";

/// Counter: leases handed to their preferred node (lease balancing).
pub const LEASE_HANDOVERS: &str = "txmgr_lease_handovers_total";

/// Counter: fenced transactions, labels `operation` and `result` = `ok` | `fenced` | `error`.
pub const FENCED_WRITES: &str = "txmgr_fenced_writes_total";

/// Counter: broadcast results by class, label `result` (see `BroadcastClass::label`).
pub const BROADCASTS: &str = "txmgr_broadcasts_total";

/// Counter: external use of a submitter's key detected, label `action` = `adopt` | `protect`.
pub const EXTERNAL_NONCE: &str = "txmgr_external_nonce_total";

/// Counter: reorgs detected by the head watcher.
pub const REORGS: &str = "txmgr_reorgs_total";

/// Counter: final intents (CONFIRMED, FAILED_FINAL, CANCELLED by a mined
/// cancel) whose block later left the canonical chain — a reorg deeper than
/// finality; each is re-opened by its leader (feed row `REORGED_OUT`).
pub const FINALITY_VIOLATIONS: &str = "txmgr_finality_violations_total";

/// Counter: receipt lookups, label `method` = `block_receipts` | `by_hash`.
pub const RECEIPT_CHECKS: &str = "txmgr_receipt_checks_total";

/// Counter: resubmits, label `kind` = `rebroadcast` | `bump` | `cancel`.
pub const RESUBMITS: &str = "txmgr_resubmits_total";

/// Counter: intents that became STUCK, label `reason` = `stuck_after` |
/// `max_resubmits` | `nonce_consumed_externally` ([`stuck_reason`]).
pub const STUCK: &str = "txmgr_stuck_total";

/// The `reason` label of [`STUCK`] for the sub-state an intent became STUCK
/// with: the setting or event that made it so.
pub fn stuck_reason(sub_state: SubState) -> &'static str {
    match sub_state {
        SubState::StuckAfter => "stuck_after",
        SubState::StuckMaxResubmits => "max_resubmits",
        other => other.as_str(),
    }
}

/// Counter: intents that were REJECTED with their nonce released and were
/// mined after all (their bytes were in a pool); each ends CONFIRMED or
/// FAILED_FINAL with a second completion row.
pub const RELEASED_MINED: &str = "txmgr_rejected_then_mined_total";

/// Counter: fillers made (0-value self-transfers taking a released nonce
/// that sat below allocated ones).
pub const FILLERS: &str = "txmgr_fillers_total";

/// Counter: batches a leader drew from its copy of the nonce cursor and
/// signed whose write found the draw no longer held (the cursor moved, an
/// intent left QUEUED, a pause): nothing of them was written or sent.
pub const PRESIGN_CONFLICTS: &str = "txmgr_presign_conflicts_total";

/// Gauge: 1 while a submitter's lowest unmined nonce is STUCK (every later
/// nonce waits behind it on chain), label `submitter` (bounded by config).
pub const HEAD_OF_LINE_BLOCKED: &str = "txmgr_head_of_line_blocked";

/// Counter: operator actions on transactions, labels `chain` (the
/// intent's) and `action` = `cancel` | `speedup` | `rebroadcast`.
pub const OPERATOR_ACTIONS: &str = "txmgr_operator_actions_total";

/// Counter: tracking actors a chain's Supervisor restarted after they
/// failed, and chain supervisors the node's root restarted, label `actor` =
/// `head_watcher` | `receipt_worker` | `finality_worker` | `resubmit_worker`
/// | `chain_supervisor`.
pub const ACTOR_RESTARTS: &str = "txmgr_actor_restarts_total";

/// Counter: creates a submitter's policy refused, label `rule` (its key:
/// `allowed_to`, `allowed_selectors`, `deny_contract_creation`,
/// `max_value_per_tx`, `max_fee_per_tx`).
pub const POLICY_REFUSALS: &str = "txmgr_policy_refusals_total";

/// Gauge: wei of `value` drawn in a submitter's spend window, labels
/// `chain`, `submitter` (submitters with a `spend_limit` only).
pub const SPEND_WINDOW: &str = "txmgr_spend_window_value_wei";

/// Gauge: a submitter's `spend_limit.value`, labels `chain`, `submitter`.
pub const SPEND_LIMIT: &str = "txmgr_spend_limit_value_wei";

/// Gauge: wei of fees counted in a submitter's spend window (paid, or the
/// worst case reserved until the receipt), labels `chain`, `submitter`.
pub const SPEND_FEES_WINDOW: &str = "txmgr_spend_window_fees_wei";

/// Gauge: a submitter's `spend_limit.fees`, labels `chain`, `submitter`.
pub const SPEND_FEES_LIMIT: &str = "txmgr_spend_limit_fees_wei";

/// Gauge: nonces a submitter drew that the chain has not mined yet
/// (txmgr's next nonce − the chain's latest nonce), labels `chain`,
/// `submitter`; set by its leader's chain check.
pub const SUBMITTER_NONCE_LAG: &str = "txmgr_submitter_nonce_lag";

/// Gauge: a submitter's QUEUED intents, labels `chain`, `submitter`
/// (every configured submitter).
pub const SUBMITTER_QUEUED: &str = "txmgr_submitter_queued";

/// Gauge: a submitter's intents holding a nonce (ALLOCATED, TRACKING,
/// STUCK), labels as [`SUBMITTER_QUEUED`].
pub const SUBMITTER_IN_FLIGHT: &str = "txmgr_submitter_in_flight";

/// Histogram: one group-commit transaction (the leaders' merged writes, of
/// any chain), begin to commit, seconds; node-level.
pub const GROUP_COMMIT_SECONDS: &str = "txmgr_group_commit_seconds";

/// Gauge: the node's database pool connections, label `state` = `in_use`
/// | `idle`.
pub const DB_POOL_CONNECTIONS: &str = "txmgr_db_pool_connections";

/// The metrics of the node as a whole, without a `chain` label: every other
/// metric carries one. Webhooks deliver every chain's events; the cluster,
/// the database, its pool and the group committer are shared by the chains;
/// TLS handshakes and trace spans belong to the process. README
/// "Operations" names each; the integration tests check the exposition
/// against this list.
pub const NODE_LEVEL: &[&str] = &[
    BUILD_INFO,
    PKCS11_SESSIONS_OPEN,
    PKCS11_SESSIONS_OPENED,
    CLUSTER_NODES,
    DATABASE_HEALTHY,
    DB_POOL_CONNECTIONS,
    GROUP_COMMIT_SECONDS,
    GROUP_COMMIT_PARTS,
    TLS_REFUSED,
    TRACE_SPANS_DROPPED,
    TRACE_SPANS_EXPORTED,
    WEBHOOK_LEASES,
    WEBHOOK_ATTEMPTS,
    WEBHOOK_ATTEMPT_SECONDS,
    WEBHOOK_DELIVERY_DELAY,
    WEBHOOK_DEAD_LETTERS,
    WEBHOOK_LAG_EVENTS,
    WEBHOOK_LAG_SECONDS,
    WEBHOOK_DEAD_LETTERS_OPEN,
    WEBHOOK_PENDING,
    HISTORY_REMOVED,
    HISTORY_ROUNDS,
    HISTORY_RETAIN,
    HISTORY_OLDEST_FINAL_AGE,
    DB_TABLE_ROWS,
    DB_TABLE_BYTES,
];

/// Sets to zero the counters a dashboard or alert reads before anything
/// happened, so their series exist from the start (Prometheus practice:
/// an absent series is not a zero).
pub fn initialise_chain_counters(chain: &str) {
    let chain = chain.to_owned();
    metrics::counter!(REORGS, "chain" => chain.clone()).increment(0);
    for reason in ["stuck_after", "max_resubmits", "nonce_consumed_externally"] {
        metrics::counter!(STUCK, "chain" => chain.clone(), "reason" => reason).increment(0);
    }
    for kind in ["rebroadcast", "bump", "cancel"] {
        metrics::counter!(RESUBMITS, "chain" => chain.clone(), "kind" => kind).increment(0);
    }
    metrics::counter!(LEASE_ACQUISITIONS, "chain" => chain.clone(), "result" => "taken_over")
        .increment(0);
    metrics::counter!(LEASE_HANDOVERS, "chain" => chain).increment(0);
    if crate::intent_trace::enabled() {
        for reason in ["queue_full", "export_failed"] {
            metrics::counter!(TRACE_SPANS_DROPPED, "reason" => reason).increment(0);
        }
        metrics::counter!(TRACE_SPANS_EXPORTED).increment(0);
    }
}

/// Counter: completions written to the feed, label `state` = CONFIRMED,
/// FAILED_FINAL, CANCELLED, REJECTED, STUCK.
pub const COMPLETIONS: &str = "txmgr_completions_total";

/// Gauge: a submitter's `min_balance`, wei, labels `chain`, `submitter`
/// (beside [`SUBMITTER_BALANCE`]: the balance is low while below it).
pub const SUBMITTER_MIN_BALANCE: &str = "txmgr_submitter_min_balance_wei";

/// Gauge: nodes of the cluster by heartbeat, label `status` = `live` (a
/// heartbeat within `node.liveness`) | `lost` (registered, heartbeat older).
pub const CLUSTER_NODES: &str = "txmgr_cluster_nodes";

/// Gauge: 1 while the database answers the readiness round (reachable,
/// migrated), else 0.
pub const DATABASE_HEALTHY: &str = "txmgr_database_healthy";

/// Histogram: `POST /v1/transactions` from the request to its answer,
/// seconds, label `result` = `created` | `replayed` | the error code.
pub const CREATE_ACK_SECONDS: &str = "txmgr_create_ack_seconds";

/// Gauge: intents QUEUED waiting for room under the spend limit, labels
/// `chain`, `submitter`.
pub const SPEND_WAITING: &str = "txmgr_spend_waiting";

/// Counter: `POST /v1/transactions` answers, label `result` = `created` |
/// `replayed` | an error code (`invalid_request`, `overloaded`, ...).
pub const CREATES: &str = "txmgr_creates_total";

/// Gauge: open intents of this chain by `state` (QUEUED, ALLOCATED,
/// TRACKING, STUCK; refreshed periodically from one grouped query, the same
/// value on every node).
pub const TRANSACTIONS: &str = "txmgr_transactions";

/// Gauge: messages waiting, label `kind` = `submitter` (actor mailboxes) |
/// `ingress` (creates not yet persisted).
pub const MAILBOX_DEPTH: &str = "txmgr_mailbox_depth";

/// Gauge: age in seconds of the oldest open (non-terminal) intent of this chain.
pub const OLDEST_PENDING_AGE: &str = "txmgr_oldest_pending_age_seconds";

/// Counter: JSON-RPC calls to the chain node, labels `method` and `result` = `ok` | `error`.
pub const RPC_CALLS: &str = "txmgr_rpc_calls_total";

/// Gauge: submitter actors on this node by `role`.
pub const SUBMITTER_ROLES: &str = "txmgr_submitter_actors";

/// Counter: calls per RPC endpoint, labels `endpoint` (configured name) and
/// `result` = `ok` | `error` (a JSON-RPC error answer) | `unavailable`
/// (timeout, connection or HTTP failure).
pub const RPC_ENDPOINT_CALLS: &str = "txmgr_rpc_endpoint_calls_total";

/// Histogram: seconds per call to an RPC endpoint, label `endpoint`.
pub const RPC_ENDPOINT_LATENCY: &str = "txmgr_rpc_endpoint_latency_seconds";

/// Gauge: 1 while an RPC endpoint serves reads and sends, label `endpoint`.
pub const RPC_ENDPOINT_HEALTHY: &str = "txmgr_rpc_endpoint_healthy";

/// Gauge: 1 while the chain (label `chain`) has at least one healthy read
/// endpoint, 0 while it is out of service (the other chains are not).
pub const CHAIN_HEALTHY: &str = "txmgr_chain_healthy";

/// Gauge: blocks an RPC endpoint's head is behind the best, label `endpoint`.
pub const RPC_ENDPOINT_HEAD_LAG: &str = "txmgr_rpc_endpoint_head_lag_blocks";

/// Counter: times reads moved to another RPC endpoint.
pub const RPC_READ_SWITCHES: &str = "txmgr_rpc_read_switches_total";

/// Histogram: parts (leaders' write sets, of any chain) per group-commit
/// transaction; node-level.
pub const GROUP_COMMIT_PARTS: &str = "txmgr_group_commit_parts";

/// Counter: signatures asked of a signer, labels `kind` = `env` |
/// `keystore` | `remote` | `aws_kms` | `pkcs11` and `result` = `ok` | `unavailable`
/// (transient: the intent waits) | `refused`.
pub const SIGNER_REQUESTS: &str = "txmgr_signer_requests_total";

/// Histogram: seconds per signature, label `kind`.
pub const SIGNER_LATENCY: &str = "txmgr_signer_latency_seconds";

/// Gauge: 1, labels `version` (the release) and `commit` (the build's
/// commit); node-level. Two values across a cluster's nodes: an upgrade in
/// progress (README "Upgrading").
pub const BUILD_INFO: &str = "txmgr_build_info";

/// Gauge: logged-in sessions open on a PKCS#11 module (idle or signing),
/// label `module` (the library's file name); node-level. At most the
/// module's `max_sessions`.
pub const PKCS11_SESSIONS_OPEN: &str = "txmgr_pkcs11_sessions_open";

/// Counter: sessions opened on a PKCS#11 module, label `module`;
/// node-level. Flat while the pool's sessions live; a token removed or a
/// session the module closed makes it climb.
pub const PKCS11_SESSIONS_OPENED: &str = "txmgr_pkcs11_sessions_opened_total";

/// Counter: webhook lease attempts, labels `webhook` and `result` =
/// `acquired` | `renewed` | `not_owner` | `released`.
pub const WEBHOOK_LEASES: &str = "txmgr_webhook_lease_acquisitions_total";

/// Counter: webhook delivery attempts, labels `webhook` and `result` =
/// `delivered` (2xx) | `retry` (timeout, connection error, 5xx, 429) |
/// `refused` (another 4xx: not retried).
pub const WEBHOOK_ATTEMPTS: &str = "txmgr_webhook_attempts_total";

/// Histogram: seconds per webhook HTTP attempt, label `webhook`.
pub const WEBHOOK_ATTEMPT_SECONDS: &str = "txmgr_webhook_attempt_seconds";

/// Histogram: seconds from an event's commit to its 2xx delivery, label
/// `webhook` (database clock to this node's clock).
pub const WEBHOOK_DELIVERY_DELAY: &str = "txmgr_webhook_delivery_delay_seconds";

/// Counter: spans not exported, label `reason`: `queue_full` (the bounded
/// export queue was full) or `export_failed` (the collector refused, timed
/// out or was unreachable). Only with `[telemetry] otlp_endpoint`.
pub const TRACE_SPANS_DROPPED: &str = "txmgr_trace_spans_dropped_total";

/// Counter: spans the collector accepted.
pub const TRACE_SPANS_EXPORTED: &str = "txmgr_trace_spans_exported_total";

/// Counter: events dead-lettered, label `webhook`.
pub const WEBHOOK_DEAD_LETTERS: &str = "txmgr_webhook_dead_letters_total";

/// Gauge: feed events after a webhook's durable cursor, label `webhook`
/// (cluster-wide, from the database; every node exports it).
pub const WEBHOOK_LAG_EVENTS: &str = "txmgr_webhook_lag_events";

/// Gauge: age in seconds of the oldest feed event after a webhook's cursor
/// (0 when none), label `webhook`.
pub const WEBHOOK_LAG_SECONDS: &str = "txmgr_webhook_lag_seconds";

/// Gauge: a webhook's dead letters not redelivered, label `webhook`.
pub const WEBHOOK_DEAD_LETTERS_OPEN: &str = "txmgr_webhook_dead_letters_open";

/// Gauge: events read and not yet done by this node's holder, label `webhook`.
pub const WEBHOOK_PENDING: &str = "txmgr_webhook_pending_events";

/// Gauge: a submitter's last balance read, in wei, label `submitter`
/// (bounded: configured submitters only).
pub const SUBMITTER_BALANCE: &str = "txmgr_submitter_balance_wei";

/// Counter: funds events recorded, label `event` = `low_balance` | `balance_restored`.
pub const FUNDS_EVENTS: &str = "txmgr_funds_events_total";

/// Counter: top-ups, label `result` = `sent` | `capped` (daily cap reached).
pub const TOP_UPS: &str = "txmgr_top_ups_total";

/// Counter: HTTPS connections closed before their handshake, label `reason` =
/// `busy` (the oldest pending one, shed for a newcomer at
/// `http.tls.max_pending_handshakes`) | `per_peer` (the same at the address's
/// `max_handshakes_per_peer`) | `timeout` (not done within
/// `http.tls.handshake_timeout`).
pub const TLS_REFUSED: &str = "txmgr_tls_connections_refused_total";

/// Counter: rows history retention removed on this node, label `table` =
/// `managed_tx` | `tx_attempt` | `tx_completion` | `webhook_dead_letter` |
/// `ops_audit` | `funds_top_up`.
pub const HISTORY_REMOVED: &str = "txmgr_history_removed_total";

/// Counter: history retention rounds on this node, label `result` = `ran`
/// (the pass reached its cutoff) | `behind` (it stopped at its batch bound;
/// the next round follows, paced by `history.delete_rate`) | `skipped`
/// (another node ran one) | `failed`.
pub const HISTORY_ROUNDS: &str = "txmgr_history_retention_rounds_total";

/// Gauge: `history.retain` in seconds (0: every intent is kept).
pub const HISTORY_RETAIN: &str = "txmgr_history_retain_seconds";

/// Gauge: age in seconds of the oldest final intent still stored
/// (cluster-wide, from the database; 0 when there is none).
pub const HISTORY_OLDEST_FINAL_AGE: &str = "txmgr_history_oldest_final_age_seconds";

/// Gauge: rows of each txmgr table, label `table` (PostgreSQL's estimate,
/// `pg_class.reltuples`, as of the last vacuum or analyze).
pub const DB_TABLE_ROWS: &str = "txmgr_db_table_rows";

/// Gauge: bytes of each txmgr table with its indexes and TOAST, label
/// `table`.
pub const DB_TABLE_BYTES: &str = "txmgr_db_table_bytes";
