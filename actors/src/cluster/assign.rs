//! Which node should lead which submitter: rendezvous (highest-random-weight)
//! hashing with bounded loads, so the split is within one of even.
//!
//! Every node computes the same answer from the same inputs — the configured
//! submitters and the live, settled node ids — with a hash that is stable
//! across processes and versions (keccak-256), so no coordination is needed.

use std::collections::HashMap;

use alloy::primitives::{keccak256, Address};

/// The weight of `node` for `submitter`: the highest weight wins.
fn weight(node: &str, submitter: &Address) -> [u8; 32] {
    let mut input = Vec::with_capacity(node.len() + 20);
    input.extend_from_slice(node.as_bytes());
    input.extend_from_slice(submitter.as_slice());
    keccak256(input).0
}

/// Assigns every submitter to one node: each submitter goes to its
/// highest-weight node that still has room, where the first `n mod k` nodes
/// (in a hash order) may take `⌈n/k⌉` submitters and the others `⌊n/k⌋`.
/// Submitters are placed in a hash order, so the result depends only on the
/// two sets. Empty when there are no nodes.
pub fn assign(submitters: &[Address], nodes: &[String]) -> HashMap<Address, String> {
    let mut assignment = HashMap::with_capacity(submitters.len());
    if nodes.is_empty() {
        return assignment;
    }
    let mut nodes: Vec<&String> = nodes.iter().collect();
    // Cached keys: one keccak per element, not one per comparison (with
    // 10,000 submitters that was ~280,000 hashes per membership refresh).
    nodes.sort_by_cached_key(|n| keccak256(n.as_bytes()).0);
    nodes.dedup();
    let mut submitters: Vec<&Address> = submitters.iter().collect();
    submitters.sort_by_cached_key(|s| keccak256(s.as_slice()).0);
    submitters.dedup();
    let (base, extra) = (
        submitters.len() / nodes.len(),
        submitters.len() % nodes.len(),
    );
    let mut room: Vec<usize> = (0..nodes.len())
        .map(|i| base + usize::from(i < extra))
        .collect();
    for submitter in submitters {
        let mut ranked: Vec<usize> = (0..nodes.len()).collect();
        ranked.sort_by_cached_key(|&i| std::cmp::Reverse(weight(nodes[i], submitter)));
        // Total room equals the number of submitters: some node has room.
        if let Some(&chosen) = ranked.iter().find(|&&i| room[i] > 0) {
            room[chosen] -= 1;
            assignment.insert(*submitter, nodes[chosen].clone());
        }
    }
    assignment
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submitters(n: u8) -> Vec<Address> {
        (0..n).map(|i| Address::repeat_byte(i + 1)).collect()
    }

    fn loads(assignment: &HashMap<Address, String>, nodes: &[String]) -> Vec<usize> {
        nodes
            .iter()
            .map(|n| assignment.values().filter(|v| *v == n).count())
            .collect()
    }

    #[test]
    fn every_submitter_is_assigned_and_loads_are_within_one_of_even() {
        for k in 1..=5 {
            let nodes: Vec<String> = (0..k).map(|i| format!("node-{i}")).collect();
            for n in [0u8, 1, 2, 7, 10, 33] {
                let subs = submitters(n);
                let assignment = assign(&subs, &nodes);
                assert_eq!(assignment.len(), subs.len());
                let loads = loads(&assignment, &nodes);
                let (min, max) = (loads.iter().min(), loads.iter().max());
                assert!(
                    max.zip(min).is_none_or(|(max, min)| max - min <= 1),
                    "{k} nodes, {n} submitters: {loads:?}"
                );
            }
        }
    }

    #[test]
    fn the_answer_depends_only_on_the_sets_not_their_order() {
        let subs = submitters(12);
        let nodes = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let mut reversed_subs = subs.clone();
        reversed_subs.reverse();
        let mut reversed_nodes = nodes.clone();
        reversed_nodes.reverse();
        assert_eq!(
            assign(&subs, &nodes),
            assign(&reversed_subs, &reversed_nodes)
        );
    }

    #[test]
    fn a_joining_node_takes_some_submitters_and_the_rest_mostly_stay() {
        let subs = submitters(30);
        let two = vec!["a".to_owned(), "b".to_owned()];
        let three = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let before = assign(&subs, &two);
        let after = assign(&subs, &three);
        let moved = subs.iter().filter(|s| before[*s] != after[*s]).count();
        assert!(after.values().filter(|n| *n == "c").count() == 10);
        // Ideal is 10 (only those going to c); bounded loads move a few more.
        assert!(moved <= 16, "{moved} of 30 moved");
    }
}
