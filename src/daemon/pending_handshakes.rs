//! The TLS handshakes a node has accepted but not finished, bounded
//! node-wide (and optionally per peer address) by shedding the **oldest**
//! pending one, never the newcomer.
//!
//! Refusing newcomers instead would let a few idle sockets keep everyone
//! out: every client behind one NAT, L4 load balancer or sidecar shares
//! an address, and a slow or hostile one among them would hold that
//! address's share. Shedding the oldest means an idle socket lives until
//! either the handshake deadline or enough newer connections arrive,
//! whichever comes first, and a live client always gets its turn.
//!
//! ```text
//! admit(ip) ─► peer at its cap?  ─► close the peer's oldest pending
//!           ─► node at its cap?  ─► close the node's oldest pending
//!           ─► PendingSlot (dropped when the handshake ends: done, failed,
//!              timed out or shed)
//! ```

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::sync::oneshot;

/// Why a pending handshake was closed to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shed {
    /// The node held `max_pending` handshakes: this was the oldest.
    Busy,
    /// Its address held `max_per_peer` handshakes: this was its oldest.
    PerPeer,
}

impl Shed {
    /// The `reason` label of `txmgr_tls_connections_refused_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Shed::Busy => "busy",
            Shed::PerPeer => "per_peer",
        }
    }
}

/// One pending handshake as the set keeps it.
#[derive(Debug)]
struct Entry {
    ip: IpAddr,
    /// Sending (or dropping) tells the handshake's task it was shed.
    shed: oneshot::Sender<Shed>,
}

/// The bookkeeping, under one lock: ids grow with arrival, so the smallest
/// id is the oldest.
#[derive(Debug, Default)]
struct Book {
    next_id: u64,
    by_age: BTreeMap<u64, Entry>,
    by_peer: HashMap<IpAddr, BTreeSet<u64>>,
}

impl Book {
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.by_age.remove(&id)?;
        if let Some(ids) = self.by_peer.get_mut(&entry.ip) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_peer.remove(&entry.ip);
            }
        }
        Some(entry)
    }

    fn shed(&mut self, id: u64, why: Shed) {
        if let Some(entry) = self.remove(id) {
            // The task may have finished meanwhile; nothing to tell then.
            let _ = entry.shed.send(why);
        }
    }
}

/// Pending handshakes of one listener.
#[derive(Debug)]
pub(crate) struct PendingHandshakes {
    book: Mutex<Book>,
    max_pending: usize,
    max_per_peer: Option<usize>,
}

/// A pending handshake's place in the set; leaves it when dropped.
#[derive(Debug)]
pub(crate) struct PendingSlot {
    set: Arc<PendingHandshakes>,
    id: u64,
    /// Resolves when this handshake was shed to make room.
    pub(crate) shed: oneshot::Receiver<Shed>,
}

impl PendingHandshakes {
    /// At most `max_pending` at once (at least 1), and at most
    /// `max_per_peer` from one address when set.
    pub(crate) fn new(max_pending: usize, max_per_peer: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            book: Mutex::default(),
            max_pending: max_pending.max(1),
            max_per_peer: max_per_peer.map(|n| n.max(1)),
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A poisoned lock only means a panic elsewhere mid-update of plain
        // maps; they are still consistent enough to serve.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a handshake from `ip`, shedding older ones to stay within the
    /// caps.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> PendingSlot {
        let mut book = self.book();
        if let Some(cap) = self.max_per_peer {
            while book.by_peer.get(&ip).is_some_and(|ids| ids.len() >= cap) {
                let Some(&oldest) = book.by_peer.get(&ip).and_then(|ids| ids.first()) else {
                    break;
                };
                book.shed(oldest, Shed::PerPeer);
            }
        }
        while book.by_age.len() >= self.max_pending {
            let Some((&oldest, _)) = book.by_age.first_key_value() else {
                break;
            };
            book.shed(oldest, Shed::Busy);
        }
        let id = book.next_id;
        book.next_id += 1;
        let (tell, shed) = oneshot::channel();
        book.by_age.insert(id, Entry { ip, shed: tell });
        book.by_peer.entry(ip).or_default().insert(id);
        PendingSlot {
            set: self.clone(),
            id,
            shed,
        }
    }

    /// Handshakes pending now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.book().by_age.len()
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.set.book().remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn shed_now(slot: &mut PendingSlot) -> Option<Shed> {
        slot.shed.try_recv().ok()
    }

    #[test]
    fn a_full_house_sheds_the_oldest_and_admits_the_newcomer() {
        let set = PendingHandshakes::new(3, None);
        let mut slots: Vec<PendingSlot> = (0..3).map(|_| set.admit(ip(1))).collect();
        let mut newest = set.admit(ip(2));
        assert_eq!(shed_now(&mut slots[0]), Some(Shed::Busy));
        assert_eq!(shed_now(&mut slots[1]), None);
        assert_eq!(shed_now(&mut slots[2]), None);
        assert_eq!(shed_now(&mut newest), None);
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn a_finished_handshake_frees_its_place() {
        let set = PendingHandshakes::new(2, None);
        let mut first = set.admit(ip(1));
        let second = set.admit(ip(1));
        drop(second);
        let _third = set.admit(ip(1));
        assert_eq!(shed_now(&mut first), None, "room was freed, nothing shed");
        assert_eq!(set.len(), 2);
        drop(first);
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn an_address_at_its_cap_sheds_its_own_oldest_not_others() {
        let set = PendingHandshakes::new(10, Some(2));
        let mut other = set.admit(ip(9));
        let mut a1 = set.admit(ip(1));
        let mut a2 = set.admit(ip(1));
        let mut a3 = set.admit(ip(1));
        assert_eq!(shed_now(&mut other), None);
        assert_eq!(shed_now(&mut a1), Some(Shed::PerPeer));
        assert_eq!(shed_now(&mut a2), None);
        assert_eq!(shed_now(&mut a3), None);
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn one_address_cannot_fill_the_node_past_its_cap() {
        let set = PendingHandshakes::new(4, Some(3));
        let mut others: Vec<PendingSlot> = (0..1).map(|_| set.admit(ip(9))).collect();
        let _flood: Vec<PendingSlot> = (0..50).map(|_| set.admit(ip(1))).collect();
        assert_eq!(shed_now(&mut others[0]), None, "the flood shed only itself");
        assert_eq!(set.len(), 4);
    }
}
