//! A cluster of real daemon processes on one database and one anvil, driven
//! by the load generator of `load`, and the end-of-scenario checks of README "Running several nodes" —
//! read from the chain and the database, independently of the daemons.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use uuid::Uuid;

pub(crate) use super::load::{Acked, Load};
use super::{
    daemon::{key_var, Daemon, DEV_KEYS},
    free_port, invariants, Anvil, TestDb,
};

/// Where the transfers go (no account of ours).
pub(crate) const SINK: &str = "0x000000000000000000000000000000000000dead";

/// Lease timing of the test cluster: fail-over takes at most
/// `duration + renew_interval` = 4 s.
pub(crate) const LEASE: &str =
    "duration = \"3s\"\nrenew_interval = \"1s\"\nclock_skew_allowance = \"500ms\"";

/// What the cluster runs.
#[derive(Debug, Clone)]
pub(crate) struct ClusterSpec {
    /// Node ids to start.
    pub(crate) nodes: Vec<&'static str>,
    /// Dev accounts used as submitters (indices into `DEV_KEYS`).
    pub(crate) submitters: Vec<usize>,
    /// Of those, the ones in strict mode.
    pub(crate) strict: Vec<usize>,
    /// Extra `[node]` keys (balancing timings).
    pub(crate) node_extra: &'static str,
    /// Finality (confirmations); deeper than any reorg a scenario makes.
    pub(crate) confirmations: u64,
}

/// A running cluster.
pub(crate) struct Cluster {
    pub(crate) db: TestDb,
    pub(crate) anvil: Anvil,
    pub(crate) daemons: Vec<Daemon>,
    pub(crate) client: reqwest::Client,
    /// Lower-case addresses of the submitters.
    pub(crate) submitters: Vec<String>,
    spec: ClusterSpec,
    rpc_url: String,
    /// A remote signer (JSON-RPC `eth_signTransaction`) every submitter
    /// uses instead of its key from the environment.
    signer_url: Option<String>,
    /// Base URLs the load generator picks from.
    pub(crate) bases: Arc<RwLock<Vec<String>>>,
}

impl Cluster {
    /// Starts anvil (mining every 200 ms), a database and the nodes; waits
    /// until every node is ready. `rpc_url` overrides the chain endpoint the
    /// daemons use (a fault proxy in front of anvil).
    pub(crate) async fn start(spec: ClusterSpec, anvil: Anvil, rpc_url: Option<String>) -> Cluster {
        Cluster::start_inner(spec, anvil, rpc_url, None).await
    }

    /// Like [`Cluster::start`], with every submitter signing through the
    /// remote signer at `signer_url`.
    pub(crate) async fn start_signed_by(
        spec: ClusterSpec,
        anvil: Anvil,
        signer_url: String,
    ) -> Cluster {
        Cluster::start_inner(spec, anvil, None, Some(signer_url)).await
    }

    async fn start_inner(
        spec: ClusterSpec,
        anvil: Anvil,
        rpc_url: Option<String>,
        signer_url: Option<String>,
    ) -> Cluster {
        let db = TestDb::migrated().await;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .expect("client");
        let rpc_url = rpc_url.unwrap_or_else(|| anvil.rpc_url());
        let mut cluster = Cluster {
            db,
            anvil,
            daemons: Vec::new(),
            client,
            submitters: spec
                .submitters
                .iter()
                .map(|i| DEV_KEYS[*i].1.to_owned())
                .collect(),
            spec: spec.clone(),
            rpc_url,
            signer_url,
            bases: Arc::default(),
        };
        for node in spec.nodes {
            cluster.add_node(node).await;
        }
        cluster
    }

    /// The configuration of one node.
    fn config(&self, node_id: &str, port: u16) -> String {
        let mut submitters = String::new();
        for i in &self.spec.submitters {
            let signer = match &self.signer_url {
                Some(url) => format!("{{ kind = \"remote\", url = \"{url}\" }}"),
                None => format!("{{ kind = \"env\", env = \"{}\" }}", key_var(*i)),
            };
            submitters.push_str(&format!(
                "[submitters.\"{}\"]\nsigner = {signer}\n",
                DEV_KEYS[*i].1,
            ));
            if self.spec.strict.contains(i) {
                submitters.push_str("max_in_flight = 1\nadvance_after = \"confirmed\"\n");
            }
        }
        let separator = if self.db.url.contains('?') { '&' } else { '?' };
        format!(
            r#"node_id = "{node_id}"
[database]
url = "{db}{separator}application_name=txmgr-{node_id}"
max_connections = 6
migrate_on_start = false
[http]
listen = "127.0.0.1:{port}"
[chain]
rpc_url = "{rpc}"
chain_id = 31337
poll_interval = "200ms"
rpc_timeout = "2s"
sweep_interval = "1s"
[lease]
{LEASE}
[node]
heartbeat_interval = "500ms"
discovery_interval = "500ms"
{node_extra}
[defaults]
finality = {{ confirmations = {confirmations} }}
resubmit_interval = "2s"
max_resubmits = 1000
stuck_after = "10m"
[log]
level = "info"
{submitters}"#,
            db = self.db.url,
            rpc = self.rpc_url,
            node_extra = self.spec.node_extra,
            confirmations = self.spec.confirmations,
        )
    }

    /// Starts one more node and waits until it is ready; returns its index.
    pub(crate) async fn add_node(&mut self, node_id: &str) -> usize {
        self.add_node_with(node_id, |config| config).await
    }

    /// [`Cluster::add_node`] with the node's configuration passed through
    /// `edit` first (e.g. another `[lease]` section).
    pub(crate) async fn add_node_with(
        &mut self,
        node_id: &str,
        edit: impl FnOnce(String) -> String,
    ) -> usize {
        let daemon = self.spawn_node_with(node_id, edit).await;
        daemon.ready(&self.client).await;
        if let Ok(mut bases) = self.bases.write() {
            bases.push(daemon.base());
        }
        self.daemons.push(daemon);
        self.daemons.len() - 1
    }

    /// Starts a process with the cluster's configuration for `node_id`
    /// (passed through `edit`) on a free port, without waiting for it and
    /// without adding it to the cluster.
    pub(crate) async fn spawn_node_with(
        &self,
        node_id: &str,
        edit: impl FnOnce(String) -> String,
    ) -> Daemon {
        let port = free_port();
        Daemon::start(node_id, port, &edit(self.config(node_id, port))).await
    }

    /// The daemon with this node id.
    pub(crate) fn node(&mut self, node_id: &str) -> &mut Daemon {
        self.daemons
            .iter_mut()
            .find(|d| d.node_id == node_id)
            .expect("node")
    }

    /// The daemon with this node id (shared).
    pub(crate) fn node_ref(&self, node_id: &str) -> &Daemon {
        self.daemons
            .iter()
            .find(|d| d.node_id == node_id)
            .expect("node")
    }

    /// The node holding a live lease of `submitter`, if any.
    pub(crate) async fn leader_of(&self, submitter: &str) -> Option<String> {
        sqlx::query_scalar(
            "SELECT owner_node FROM submitter_lease WHERE submitter = $1 AND expires_at > now()",
        )
        .bind(submitter)
        .fetch_optional(&self.db.pool)
        .await
        .expect("lease")
    }

    /// Live leases per node.
    pub(crate) async fn leases_per_node(&self) -> HashMap<String, usize> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT owner_node, count(*) FROM submitter_lease WHERE expires_at > now()
              GROUP BY owner_node",
        )
        .fetch_all(&self.db.pool)
        .await
        .expect("leases");
        rows.into_iter()
            .map(|(node, n)| (node, usize::try_from(n).unwrap_or(0)))
            .collect()
    }

    /// Starts sending `total` creates, `per_second`, to random nodes.
    pub(crate) fn load(&self, total: usize, per_second: u32, seed: u64) -> Load {
        Load::start(
            self.client.clone(),
            self.bases.clone(),
            self.submitters.clone(),
            total,
            per_second,
            seed,
        )
    }

    /// The chain's side of a stall, for the failure message: whether anvil
    /// still mines (its head moves within 3 s) and what waits in its pool.
    async fn chain_state(&self) -> String {
        let head = self.anvil.block_number().await;
        let moved = tokio::time::timeout(Duration::from_secs(3), async {
            while self.anvil.block_number().await == head {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .is_ok();
        let pool = self.anvil.rpc("txpool_status", serde_json::json!([])).await;
        format!("chain head {head}, still mining: {moved}; txpool_status {pool}")
    }

    /// Waits until every acknowledged intent is final (or STUCK with a
    /// reason), then checks the promises: nothing acknowledged is lost,
    /// every intent confirmed exactly once on chain, nonces contiguous per
    /// submitter (gap-free strict submitters included), chain and database
    /// agree.
    pub(crate) async fn verify(&self, acked: &[Acked]) {
        let ids: Vec<Uuid> = acked.iter().map(|a| a.tx_id).collect();
        let pool = &self.db.pool;
        let open = || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM managed_tx WHERE tx_id = ANY($1)
                   AND (state IN ('QUEUED', 'ALLOCATED', 'TRACKING')
                        OR (state = 'STUCK' AND last_error IS NULL))",
            )
            .bind(&ids)
            .fetch_one(pool)
            .await
            .expect("open intents")
        };
        let waited = tokio::time::timeout(Duration::from_secs(120), async {
            while open().await > 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        if waited.is_err() {
            self.dump_logs();
            panic!(
                "{} intents still open after 120 s: {}\n{}",
                open().await,
                self.states(&ids).await,
                self.chain_state().await
            );
        }
        let present: Vec<(Uuid, Option<String>, String)> =
            sqlx::query_as("SELECT tx_id, request_id, state FROM managed_tx WHERE tx_id = ANY($1)")
                .bind(&ids)
                .fetch_all(pool)
                .await
                .expect("acknowledged intents");
        assert_eq!(
            present.len(),
            acked.len(),
            "an acknowledged create was lost"
        );
        let by_id: HashMap<Uuid, (Option<String>, String)> = present
            .into_iter()
            .map(|(id, request, state)| (id, (request, state)))
            .collect();
        for a in acked {
            let (request, state) = &by_id[&a.tx_id];
            assert_eq!(request.as_deref(), Some(a.request_id.as_str()));
            assert_eq!(state, "CONFIRMED", "{} ({})", a.tx_id, a.request_id);
        }
        let total: i64 = sqlx::query_scalar("SELECT count(*) FROM managed_tx")
            .fetch_one(pool)
            .await
            .expect("count");
        assert_eq!(total as usize, acked.len(), "rows nobody acknowledged");
        for submitter in &self.submitters {
            invariants::check(pool, &self.anvil, submitter, 0).await;
        }
    }

    async fn states(&self, ids: &[Uuid]) -> String {
        let rows: Vec<StateRow> = sqlx::query_as(
            "SELECT submitter, state, sub_state, count(*), min(nonce), min(last_error)
               FROM managed_tx WHERE tx_id = ANY($1)
              GROUP BY submitter, state, sub_state ORDER BY submitter, state",
        )
        .bind(ids)
        .fetch_all(&self.db.pool)
        .await
        .unwrap_or_default();
        let allocated: Vec<(i64, bool, Option<String>, Option<i64>)> = sqlx::query_as(
            "SELECT m.nonce, EXISTS (SELECT 1 FROM tx_attempt a WHERE a.tx_id = m.tx_id),
                    m.last_error,
                    (EXTRACT(EPOCH FROM (now() - m.next_resubmit_at)) * 1000)::bigint
               FROM managed_tx m WHERE m.tx_id = ANY($1) AND m.state = 'ALLOCATED' ORDER BY m.nonce",
        )
        .bind(ids)
        .fetch_all(&self.db.pool)
        .await
        .unwrap_or_default();
        format!("{rows:?}\nALLOCATED (nonce, signed, last_error, ms past due): {allocated:?}")
    }

    /// Prints every node's log (on failure).
    pub(crate) fn dump_logs(&self) {
        for daemon in &self.daemons {
            let log = daemon.log();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            eprintln!("---- {} (last 80 lines) ----", daemon.node_id);
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// submitter, state, sub_state, count, lowest nonce, an error (diagnostics).
type StateRow = (
    String,
    String,
    Option<String>,
    i64,
    Option<i64>,
    Option<String>,
);
