//! The chains this node serves, as the API sees them: each chain's id and
//! name, where its creates go, and (in the daemon) its engine and RPC
//! endpoints. A request names its chain with `chain_id`; with one chain
//! configured it may leave it out.

use std::sync::{Arc, RwLock};

use txmgr_actors::{chain::ChainClient, domain::ChainId, node::Engine};

use super::{error::ApiError, Submissions};

/// One chain of this node.
#[derive(Clone)]
pub struct ServedChain {
    /// `[chains.<name>]` (`default` for `[chain]`): the `chain` label.
    pub name: String,
    /// Its chain id.
    pub chain_id: ChainId,
    /// Where its creates go.
    pub submissions: Arc<dyn Submissions>,
    /// Its engine; `None` in tools that run the API alone (ops endpoints
    /// then answer 503).
    pub engine: Option<Engine>,
    /// Its RPC endpoints (their health for the ops views).
    pub client: Option<Arc<dyn ChainClient>>,
    /// It has a send-only endpoint: an intent may ask for private sending.
    pub private_sends: bool,
}

impl ServedChain {
    /// A chain with only a create path (tests and tools).
    pub fn new(name: &str, chain_id: ChainId, submissions: Arc<dyn Submissions>) -> Self {
        Self {
            name: name.to_string(),
            chain_id,
            submissions,
            engine: None,
            client: None,
            private_sends: false,
        }
    }

    /// The newest block its head watcher has processed, if it runs.
    pub fn head(&self) -> Option<u64> {
        self.engine
            .as_ref()
            .map(|engine| engine.progress().head())
            .filter(|head| *head > 0)
    }
}

/// Every chain of this node, in configuration (name) order. Cheap to clone;
/// every clone sees the same set, which a reload replaces when it adds or
/// removes a chain ([`ServedChains::replace`]).
#[derive(Clone)]
pub struct ServedChains(Arc<Shared>);

struct Shared {
    /// The key of the deployment's webhook rows.
    home: ChainId,
    /// Each chain behind an `Arc`: a request takes its chain without copying it.
    list: RwLock<Arc<[Arc<ServedChain>]>>,
    /// Names of chains a reload removed (and did not add back): their
    /// series are left out of `/metrics`.
    retired: RwLock<Vec<String>>,
}

impl ServedChains {
    /// The chains, in the order the ops views list them.
    pub fn new(chains: Vec<ServedChain>) -> Self {
        let home = chains.first().map_or(ChainId::from(0), |c| c.chain_id);
        Self(Arc::new(Shared {
            home,
            list: RwLock::new(shared(chains)),
            retired: RwLock::new(Vec::new()),
        }))
    }

    /// The chains, with `home` as the key of the webhook rows (the chain
    /// the webhooks are keyed by, which need not be the first).
    pub fn with_home(chains: Vec<ServedChain>, home: ChainId) -> Self {
        Self(Arc::new(Shared {
            home,
            list: RwLock::new(shared(chains)),
            retired: RwLock::new(Vec::new()),
        }))
    }

    /// One chain named `default` with only a create path (tests and tools).
    pub fn single(chain_id: ChainId, submissions: Arc<dyn Submissions>) -> Self {
        Self::new(vec![ServedChain::new(
            crate::config::SHORTHAND_CHAIN_NAME,
            chain_id,
            submissions,
        )])
    }

    /// Serves `chains` from now on (a reload added or removed a chain);
    /// the webhook key ([`ServedChains::home`]) stays.
    pub fn replace(&self, chains: Vec<ServedChain>) {
        let mut list = self.0.list.write().unwrap_or_else(|e| e.into_inner());
        let mut retired = self.0.retired.write().unwrap_or_else(|e| e.into_inner());
        retired.extend(
            list.iter()
                .filter(|old| !chains.iter().any(|new| new.name == old.name))
                .map(|old| old.name.clone()),
        );
        retired.retain(|name| !chains.iter().any(|new| &new.name == name));
        retired.sort();
        retired.dedup();
        *list = shared(chains);
    }

    /// Names of chains a reload removed and did not add back.
    pub fn retired(&self) -> Vec<String> {
        self.0
            .retired
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The chains served now.
    pub fn list(&self) -> Arc<[Arc<ServedChain>]> {
        self.0
            .list
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The key of the deployment's webhook rows (cursor, lease, dead
    /// letters), which cover every chain's events: the webhooks' key chain
    /// (see [`ServedChains::with_home`]), else the first chain at start.
    pub fn home(&self) -> ChainId {
        self.0.home
    }

    /// Every chain id.
    pub fn ids(&self) -> Vec<ChainId> {
        self.list().iter().map(|c| c.chain_id).collect()
    }

    /// The chain with this id, if served here.
    pub fn by_id(&self, chain_id: ChainId) -> Option<Arc<ServedChain>> {
        self.list().iter().find(|c| c.chain_id == chain_id).cloned()
    }

    /// The chain a request names in `field`, or the only one when it names
    /// none: 400 `missing_field` when several are served and none is named,
    /// 400 `invalid_request` for a chain not served here.
    pub fn resolve(
        &self,
        requested: Option<u64>,
        field: &str,
    ) -> Result<Arc<ServedChain>, ApiError> {
        let list = self.list();
        match requested {
            Some(id) => {
                let served = list.iter().find(|c| c.chain_id == ChainId::from(id));
                served.cloned().ok_or_else(|| {
                    ApiError::invalid(
                        field,
                        format!("chain {id} is not served here (served: {})", listed(&list)),
                    )
                })
            }
            None => match &*list {
                [only] => Ok(only.clone()),
                _ => Err(ApiError::MissingField {
                    field: field.to_string(),
                    message: format!(
                        "{field} is required: this deployment serves several chains ({})",
                        listed(&list)
                    ),
                }),
            },
        }
    }

    /// The chains a filter names (every chain when it names none); 400 for
    /// a chain not served here.
    pub fn filter(&self, requested: &[u64], field: &str) -> Result<Vec<ChainId>, ApiError> {
        if requested.is_empty() {
            return Ok(self.ids());
        }
        requested
            .iter()
            .map(|id| self.resolve(Some(*id), field).map(|c| c.chain_id))
            .collect()
    }
}

/// `1 (mainnet), 8453 (base)`, for error messages.
fn shared(chains: Vec<ServedChain>) -> Arc<[Arc<ServedChain>]> {
    chains.into_iter().map(Arc::new).collect()
}

fn listed(chains: &[Arc<ServedChain>]) -> String {
    chains
        .iter()
        .map(|c| format!("{} ({})", c.chain_id, c.name))
        .collect::<Vec<_>>()
        .join(", ")
}
