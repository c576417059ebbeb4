//! Who owns a lease: one running process, not one configured name.
//!
//! `node_id` is what operators configure and read; it was also the lease
//! owner, so two processes started with one `node_id` (two containers with
//! the same hostname, a copied config file) renewed each other's leases with
//! the same fencing token and both broadcast. Each process now draws an
//! instance id at start; lease rows, renewals, releases and the fence compare
//! both, and the node registration refuses a second live process with the
//! same `node_id` (`store::node::register`).

use std::{fmt, sync::Arc};

/// Characters of the random instance id (hex, 48 bits: unique among the
/// processes that ever share one `node_id`).
const INSTANCE_LEN: usize = 12;

/// The owner identity of one process: its configured `node_id` plus the
/// instance id it drew at start.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseOwner {
    /// The configured, human-readable node id (`node_id`).
    pub node_id: Arc<str>,
    /// Random per process; never reused, so a restarted process is a new
    /// owner and takes its predecessor's leases over with a new token.
    pub instance: Arc<str>,
}

impl LeaseOwner {
    /// An owner with a known instance id (tests, and reading rows back).
    pub fn new(node_id: impl Into<Arc<str>>, instance: impl Into<Arc<str>>) -> Self {
        Self {
            node_id: node_id.into(),
            instance: instance.into(),
        }
    }

    /// The identity of this process: `node_id` with a fresh random instance.
    pub fn for_this_process(node_id: impl Into<Arc<str>>) -> Self {
        let random = uuid::Uuid::new_v4().simple().to_string();
        Self::new(node_id, &random[..INSTANCE_LEN])
    }

    /// True when the row's owner columns name this owner.
    pub fn is(&self, node_id: &str, instance: &str) -> bool {
        &*self.node_id == node_id && &*self.instance == instance
    }
}

/// `node_id/instance`, as logs and error messages show it.
impl fmt::Display for LeaseOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.node_id, self.instance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_draws_its_own_instance() {
        let a = LeaseOwner::for_this_process("n1");
        let b = LeaseOwner::for_this_process("n1");
        assert_eq!(a.node_id, b.node_id);
        assert_ne!(a, b, "two processes with one node_id are two owners");
        assert_eq!(a.instance.len(), INSTANCE_LEN);
        assert!(a.is("n1", &a.instance));
        assert!(!a.is("n1", &b.instance));
        assert_eq!(a.to_string(), format!("n1/{}", a.instance));
    }
}
