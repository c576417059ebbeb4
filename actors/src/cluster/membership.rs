//! The live node set and the preferred node of every submitter, refreshed
//! from the database and shared by this node's actors.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use alloy::primitives::{keccak256, Address};
use sqlx::PgPool;

use super::assign;
use crate::store::{node, StoreResult};

/// Lease balancing settings (`[node]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceConfig {
    /// Balance leases over live nodes at all.
    pub enabled: bool,
    /// A node is alive while its heartbeat is younger than this.
    pub liveness: Duration,
    /// A node receives leases only after it has been up this long.
    pub settle: Duration,
    /// A leader keeps a lease at least this long before handing it over.
    pub min_hold: Duration,
    /// How much later than the preferred node another node takes an
    /// expired lease.
    pub handover_grace: Duration,
    /// How often the view is refreshed.
    pub refresh: Duration,
}

impl Default for BalanceConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            liveness: Duration::from_secs(15),
            settle: Duration::from_secs(10),
            min_hold: Duration::from_secs(30),
            handover_grace: Duration::from_secs(2),
            refresh: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Default)]
struct View {
    live: HashSet<String>,
    settled: Vec<String>,
    preferred: HashMap<Address, String>,
    /// The submitters `preferred` was computed for.
    assigned: Vec<Address>,
}

/// Whether the preferred nodes must be computed again: balancing is on and
/// the settled nodes or the configured submitters changed. A refresh that
/// finds the same cluster costs no hashing (10,000 submitters are 10,000
/// keccaks per assignment, every refresh interval, on an idle node).
fn needs_assignment(
    enabled: bool,
    view: &View,
    settled: &[String],
    submitters: &[Address],
) -> bool {
    enabled && (view.settled != settled || view.assigned != submitters)
}

/// What this node knows about the cluster.
#[derive(Debug, Default)]
pub struct Membership {
    config: BalanceConfig,
    view: RwLock<View>,
}

impl Membership {
    /// An empty view (until the first refresh nothing is preferred).
    pub fn new(config: BalanceConfig) -> Self {
        Self {
            config,
            view: RwLock::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> BalanceConfig {
        self.config
    }

    /// The submitter's preferred node, if balancing is on and known.
    pub fn preferred(&self, submitter: &Address) -> Option<String> {
        if !self.config.enabled {
            return None;
        }
        self.view
            .read()
            .ok()
            .and_then(|v| v.preferred.get(submitter).cloned())
    }

    /// Live node ids, sorted.
    pub fn live_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .view
            .read()
            .map(|v| v.live.iter().cloned().collect())
            .unwrap_or_default();
        nodes.sort();
        nodes
    }

    fn is_live(&self, node: &str) -> bool {
        self.view.read().is_ok_and(|v| v.live.contains(node))
    }

    /// Extra wait before `me` takes over the submitter's expired lease: the
    /// hand-over grace when another live node is preferred (and is not the
    /// holder whose lease lapsed — then it is evidently not renewing), else
    /// none.
    pub fn defer_for(&self, submitter: &Address, me: &str, last_owner: Option<&str>) -> Duration {
        match self.preferred(submitter) {
            Some(p) if p != me && Some(p.as_str()) != last_owner && self.is_live(&p) => {
                self.config.handover_grace
            }
            _ => Duration::ZERO,
        }
    }

    /// The node `me` should hand the submitter's lease to, once it has held
    /// it for `held`: the preferred node when that is another live, settled
    /// node and `held` ≥ `min_hold`.
    pub fn hand_over_to(&self, submitter: &Address, me: &str, held: Duration) -> Option<String> {
        if held < self.config.min_hold {
            return None;
        }
        self.preferred(submitter)
            .filter(|p| p != me && self.is_live(p))
    }

    /// The preferred node of a named singleton job (a webhook): the settled
    /// node with the highest rendezvous weight for `name`, if balancing is on.
    pub fn preferred_for_name(&self, name: &str) -> Option<String> {
        if !self.config.enabled {
            return None;
        }
        let view = self.view.read().ok()?;
        view.settled
            .iter()
            .max_by_key(|node| keccak256([node.as_bytes(), b"/", name.as_bytes()].concat()).0)
            .cloned()
    }

    /// [`Membership::defer_for`] for a named job: the hand-over grace when
    /// another live node is preferred for it.
    pub fn defer_for_name(&self, name: &str, me: &str) -> Duration {
        match self.preferred_for_name(name) {
            Some(p) if p != me && self.is_live(&p) => self.config.handover_grace,
            _ => Duration::ZERO,
        }
    }

    /// [`Membership::hand_over_to`] for a named job held for `held`.
    pub fn hand_over_name_to(&self, name: &str, me: &str, held: Duration) -> Option<String> {
        if held < self.config.min_hold {
            return None;
        }
        self.preferred_for_name(name)
            .filter(|p| p != me && self.is_live(p))
    }

    /// Replaces the view: `live` nodes, of which `settled` may receive leases.
    pub fn update(&self, live: Vec<String>, settled: &[String], submitters: &[Address]) {
        // In a fixed order, so the same sets compare equal however they were
        // listed (the assignment itself does not depend on the order).
        let mut settled = settled.to_vec();
        settled.sort_unstable();
        let mut submitters = submitters.to_vec();
        submitters.sort_unstable();
        let (settled, submitters) = (settled.as_slice(), submitters.as_slice());
        let recompute = self.view.read().map_or(true, |v| {
            needs_assignment(self.config.enabled, &v, settled, submitters)
        });
        let preferred = recompute.then(|| assign(submitters, settled));
        if let Ok(mut view) = self.view.write() {
            view.live = live.into_iter().collect();
            view.settled = settled.to_vec();
            if let Some(preferred) = preferred {
                view.preferred = preferred;
                view.assigned = submitters.to_vec();
            }
        }
    }
}

/// Reads the live and settled nodes (database time).
async fn read_nodes(
    pool: &PgPool,
    config: &BalanceConfig,
) -> StoreResult<(Vec<String>, Vec<String>)> {
    let nodes = node::live(pool, config.liveness, config.settle).await?;
    let settled = nodes
        .iter()
        .filter(|n| n.settled)
        .map(|n| n.node_id.clone())
        .collect();
    Ok((nodes.into_iter().map(|n| n.node_id).collect(), settled))
}

/// Refreshes `membership` every `config.refresh` for the submitters
/// `submitters()` returns (the configured set, which a reload may change).
pub async fn refresh_loop(
    pool: PgPool,
    membership: Arc<Membership>,
    submitters: impl Fn() -> Vec<Address> + Send + 'static,
) {
    let config = membership.config();
    let mut tick = tokio::time::interval(config.refresh);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_warning: Option<Instant> = None;
    loop {
        tick.tick().await;
        match read_nodes(&pool, &config).await {
            Ok((live, settled)) => membership.update(live, &settled, &submitters()),
            Err(err) => {
                if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(target: "txmgr::cluster", error = %err, "reading cluster membership failed");
                    last_warning = Some(Instant::now());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced() -> Membership {
        Membership::new(BalanceConfig {
            enabled: true,
            ..BalanceConfig::default()
        })
    }

    #[test]
    fn the_assignment_is_computed_only_when_balancing_is_on_and_the_cluster_changed() {
        let view = View {
            settled: vec!["a".into(), "b".into()],
            assigned: vec![Address::repeat_byte(1)],
            ..View::default()
        };
        let subs = [Address::repeat_byte(1)];
        let nodes = ["a".to_string(), "b".to_string()];
        assert!(!needs_assignment(true, &view, &nodes, &subs));
        assert!(!needs_assignment(false, &view, &["c".into()], &subs));
        assert!(needs_assignment(true, &view, &["a".into()], &subs));
        assert!(needs_assignment(
            true,
            &view,
            &nodes,
            &[Address::repeat_byte(2)]
        ));
    }

    #[test]
    fn a_refresh_in_another_order_keeps_the_view_and_a_new_node_changes_it() {
        let membership = balanced();
        let subs: Vec<Address> = (1..=20).map(Address::repeat_byte).collect();
        let mut reversed = subs.clone();
        reversed.reverse();
        membership.update(
            vec!["a".into(), "b".into()],
            &["a".into(), "b".into()],
            &subs,
        );
        let before: Vec<Option<String>> = subs.iter().map(|s| membership.preferred(s)).collect();
        assert!(before.iter().all(Option::is_some));
        membership.update(
            vec!["b".into(), "a".into()],
            &["b".into(), "a".into()],
            &reversed,
        );
        let again: Vec<Option<String>> = subs.iter().map(|s| membership.preferred(s)).collect();
        assert_eq!(before, again);
        let nodes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        membership.update(nodes.clone(), &nodes, &subs);
        assert!(subs
            .iter()
            .any(|s| membership.preferred(s).as_deref() == Some("c")));
    }
}
