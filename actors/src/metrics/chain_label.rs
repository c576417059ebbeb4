//! The `chain` label of every per-chain series: the chain's configured name
//! (`[chains.<name>]`, `default` for `[chain]`), registered by each engine at
//! start, so code that only knows a chain id (the store, the endpoint set)
//! labels its series the same way as the actors.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock, RwLock},
};

use crate::domain::ChainId;

fn names() -> &'static RwLock<HashMap<ChainId, Arc<str>>> {
    static NAMES: OnceLock<RwLock<HashMap<ChainId, Arc<str>>>> = OnceLock::new();
    NAMES.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers the name `chain_id`'s series are labelled with.
pub fn name_chain(chain_id: ChainId, name: &str) {
    let mut names = names().write().unwrap_or_else(|e| e.into_inner());
    names.insert(chain_id, Arc::from(name));
}

/// The `chain` label of `chain_id`: its registered name, else the id in
/// decimal (a tool or test that runs an engine part alone).
pub fn chain_label(chain_id: ChainId) -> String {
    let names = names().read().unwrap_or_else(|e| e.into_inner());
    match names.get(&chain_id) {
        Some(name) => name.to_string(),
        None => chain_id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_chain_is_labelled_by_name_others_by_id() {
        name_chain(ChainId::from(777_001), "testnet-a");
        assert_eq!(chain_label(ChainId::from(777_001)), "testnet-a");
        assert_eq!(chain_label(ChainId::from(777_002)), "777002");
    }
}
