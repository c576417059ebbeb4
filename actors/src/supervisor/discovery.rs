//! The node's lease scan: finding work nobody drives, for every configured
//! submitter at once, in one query per round — instead of every standby
//! polling its own lease.
//!
//! A round reads each submitter with open intents (or with `min_balance`
//! set: its funds are watched while idle too) whose lease is not held
//! live by this process: no lease row, a released or expired one, or one of
//! ours whose actor is gone. A lease can be taken over once it has been
//! expired for the clock-skew allowance (plus the hand-over grace when
//! another live node is preferred); those submitters' actors are woken (or
//! started), and the next round is timed to the earliest foreign lease that
//! could lapse, so a dead node's submitters are taken within the fail-over
//! bound without polling per submitter.

use std::time::Duration;

use alloy::primitives::Address;

use super::EngineShared;
use crate::{
    domain::ChainId,
    store::{lease_scan, nonce_cursor, StoreResult},
};

/// Margin after a foreign lease becomes takeable before the scan looks.
const SCAN_SLACK: Duration = Duration::from_millis(50);
/// Next round after waking actors: one that deferred (or lost a race) is
/// looked at again soon.
pub(crate) const AFTER_WAKING: Duration = Duration::from_millis(500);

/// One row of the scan: a submitter with open work and its lease, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenLease {
    /// The submitter.
    pub(crate) address: Address,
    /// The lease holder (None: no lease row).
    pub(crate) owner_node: Option<String>,
    /// This process holds (or last held) it.
    pub(crate) mine: bool,
    /// Milliseconds until `expires_at` by the database clock; negative once
    /// expired (that long ago).
    pub(crate) expires_in_ms: i64,
}

/// What a round found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ScanResult {
    /// Submitters whose actor should try to take the lease now.
    pub(crate) wake: Vec<Address>,
    /// When the first foreign lease seen becomes takeable (None: none seen;
    /// the regular discovery interval applies).
    pub(crate) next_in: Option<Duration>,
}

/// Decides, from one round's rows, whom to wake and when to look again.
/// `defer` gives the extra wait before this node may take a submitter's
/// lease from `owner` (lease balancing); `skew` is the clock-skew allowance.
pub(crate) fn plan(
    rows: &[OpenLease],
    skew: Duration,
    defer: impl Fn(&Address, Option<&str>) -> Duration,
) -> ScanResult {
    let mut result = ScanResult::default();
    for row in rows {
        if row.owner_node.is_none() || row.mine {
            // Free, or ours without a live actor: take it (ours at once).
            result.wake.push(row.address);
            continue;
        }
        let wait = skew + defer(&row.address, row.owner_node.as_deref());
        let wait_ms = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
        let takeable_in = row.expires_in_ms.saturating_add(wait_ms);
        if takeable_in <= 0 {
            result.wake.push(row.address);
        } else {
            let at =
                Duration::from_millis(u64::try_from(takeable_in).unwrap_or(u64::MAX)) + SCAN_SLACK;
            result.next_in = Some(result.next_in.map_or(at, |n: Duration| n.min(at)));
        }
    }
    result
}

/// One round: configured submitters with open intents whose lease this
/// process does not hold live.
pub(crate) async fn scan(shared: &EngineShared) -> StoreResult<Vec<OpenLease>> {
    let chain_id = ChainId::from(shared.config.chain_id);
    let monitored = shared.funds_monitored();
    let rows =
        lease_scan::unled_open_work(&shared.pool, chain_id, &shared.config.owner, &monitored)
            .await?;
    Ok(rows
        .into_iter()
        .filter(|row| shared.context(&row.submitter).is_some())
        .map(|row| OpenLease {
            address: row.submitter,
            owner_node: row.owner_node,
            mine: row.mine,
            expires_in_ms: row.expires_in_ms,
        })
        .collect())
}

/// Reads the PROTECT reasons of `addresses` (standbys showing one: it may
/// have been cleared on the leader's node), one query for all.
pub(crate) async fn protect_reasons(
    shared: &EngineShared,
    addresses: &[Address],
) -> StoreResult<Vec<(Address, Option<String>)>> {
    let chain_id = ChainId::from(shared.config.chain_id);
    nonce_cursor::protect_reasons(&shared.pool, chain_id, addresses).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKEW: Duration = Duration::from_millis(500);

    fn row(byte: u8, owner: Option<&str>, mine: bool, expires_in_ms: i64) -> OpenLease {
        OpenLease {
            address: Address::repeat_byte(byte),
            owner_node: owner.map(str::to_owned),
            mine,
            expires_in_ms,
        }
    }

    #[test]
    fn free_or_own_leases_are_taken_at_once() {
        let result = plan(
            &[row(1, None, false, 0), row(2, Some("me"), true, -10)],
            SKEW,
            |_, _| Duration::ZERO,
        );
        assert_eq!(
            result.wake,
            vec![Address::repeat_byte(1), Address::repeat_byte(2)]
        );
        assert_eq!(result.next_in, None);
    }

    #[test]
    fn a_foreign_lease_is_taken_after_expiry_plus_skew_and_the_next_round_is_timed_to_it() {
        let live = row(1, Some("other"), false, 3_000);
        let lapsing = row(2, Some("other"), false, -200);
        let lapsed = row(3, Some("other"), false, -600);
        let result = plan(&[live, lapsing, lapsed], SKEW, |_, _| Duration::ZERO);
        assert_eq!(result.wake, vec![Address::repeat_byte(3)]);
        // 300 ms until the second is takeable.
        assert_eq!(result.next_in, Some(Duration::from_millis(350)));
        let only_live = plan(&[row(1, Some("other"), false, 3_000)], SKEW, |_, _| {
            Duration::ZERO
        });
        assert!(only_live.wake.is_empty());
        assert_eq!(only_live.next_in, Some(Duration::from_millis(3_550)));
    }

    #[test]
    fn a_node_that_is_not_preferred_waits_the_hand_over_grace_longer() {
        let lapsed = row(1, Some("other"), false, -600);
        let grace = |_: &Address, _: Option<&str>| Duration::from_secs(2);
        let result = plan(std::slice::from_ref(&lapsed), SKEW, grace);
        assert!(result.wake.is_empty());
        assert_eq!(result.next_in, Some(Duration::from_millis(1_950)));
    }

    #[test]
    fn nothing_open_means_no_early_round() {
        assert_eq!(
            plan(&[], SKEW, |_, _| Duration::ZERO),
            ScanResult::default()
        );
    }
}
