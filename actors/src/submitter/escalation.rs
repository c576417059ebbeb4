//! What a claimed resubmit does — re-broadcast, bump, cancel — and when an
//! intent is STUCK: pure functions of the claimed row and the settings, so
//! every escalation rule is unit-tested without a node or a database.

use super::SubmitterSettings;
use crate::{
    domain::{AttemptKind, SubState, TxState},
    store::resubmit_claims::{ClaimedResubmit, OperatorAction},
};

/// What to send for one claimed intent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plan {
    /// The newest attempt's identical bytes.
    Rebroadcast,
    /// A new attempt at the same nonce with raised fees.
    Replace {
        /// `Bump` (same intent) or `Cancel` (0-value self-transfer).
        kind: AttemptKind,
        /// Fee factor (at least 1.10 is applied).
        multiplier: f64,
    },
}

/// Chooses the action for a claimed intent. `head_nonce` is the lowest
/// unmined nonce of the submitter: only the head of the line is cancelled by
/// the `cancel` stuck policy (later nonces wait behind it anyway).
pub(crate) fn plan(
    claimed: &ClaimedResubmit,
    settings: &SubmitterSettings,
    head_nonce: Option<u64>,
) -> Plan {
    let cancelling = claimed.latest_kind == AttemptKind::Cancel;
    let follow_up = if cancelling {
        AttemptKind::Cancel
    } else {
        AttemptKind::Bump
    };
    match claimed.requested {
        Some(OperatorAction::Cancel) if !cancelling => Plan::Replace {
            kind: AttemptKind::Cancel,
            multiplier: settings.gas_bump.multiplier,
        },
        // A cancel asked for again while one is out (the request raced the
        // first one's signing): nothing new to sign unless the schedule is
        // due anyway, so repeated cancels never climb the fees.
        Some(OperatorAction::Cancel) if !claimed.on_schedule => Plan::Rebroadcast,
        Some(OperatorAction::Speedup) => Plan::Replace {
            kind: follow_up,
            multiplier: settings.gas_bump.multiplier,
        },
        Some(OperatorAction::Rebroadcast) => Plan::Rebroadcast,
        _ if claimed.state == TxState::Stuck
            && settings.cancel_when_stuck
            && !cancelling
            && head_nonce == Some(claimed.nonce) =>
        {
            Plan::Replace {
                kind: AttemptKind::Cancel,
                multiplier: settings.gas_bump.multiplier,
            }
        }
        _ => match settings.gas_bump.on_resubmit() {
            Some(multiplier) => Plan::Replace {
                kind: follow_up,
                multiplier,
            },
            None => Plan::Rebroadcast,
        },
    }
}

/// Why an open intent is STUCK now, if it is: an accepted one counts from
/// its first accepted broadcast, one no node has accepted yet from its
/// allocation — the same rules for both. Gives the STUCK sub-state and the
/// reason recorded as `last_error`.
pub(crate) fn stuck_reason(
    claimed: &ClaimedResubmit,
    settings: &SubmitterSettings,
) -> Option<(SubState, String)> {
    let (since, what) = match claimed.state {
        TxState::Tracking => (claimed.since_first_broadcast, "the first broadcast"),
        TxState::Allocated => (
            claimed.since_allocated,
            "its nonce was assigned, and no node has accepted it",
        ),
        _ => return None,
    };
    if let Some(age) = since {
        if age >= settings.stuck_after {
            return Some((
                SubState::StuckAfter,
                format!(
                    "no receipt {}s after {what} (stuck_after {}s)",
                    age.as_secs(),
                    settings.stuck_after.as_secs()
                ),
            ));
        }
    }
    // `resubmits` counts this claim: STUCK once max_resubmits were made.
    if claimed.resubmits > settings.max_resubmits {
        return Some((
            SubState::StuckMaxResubmits,
            format!(
                "no receipt after {} resubmits (max_resubmits {})",
                claimed.resubmits - 1,
                settings.max_resubmits
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use alloy::primitives::{Bytes, B256, U256};
    use uuid::Uuid;

    use super::*;
    use crate::{
        domain::Intent,
        store::resubmit_claims::AttemptFees,
        submitter::{settings::DEFAULT_BUMP_MULTIPLIER, GasBump},
    };

    fn claimed(state: TxState, kind: AttemptKind) -> ClaimedResubmit {
        ClaimedResubmit {
            tx_id: Uuid::nil(),
            nonce: 4,
            state,
            intent: Intent {
                to: None,
                value: U256::ZERO,
                data: Bytes::new(),
                gas_limit: Some(21_000),
                max_fee_per_gas: None,
                max_priority_fee_per_gas: None,
                private: false,
                valid_until: None,
            },
            resubmits: 1,
            since_first_broadcast: Some(Duration::from_secs(1)),
            since_allocated: Some(Duration::from_secs(1)),
            requested: None,
            requested_by: None,
            on_schedule: true,
            latest_hash: B256::ZERO,
            latest_raw: Bytes::new(),
            resend_hash: B256::ZERO,
            resend_raw: Bytes::new(),
            latest_kind: kind,
            latest_fees: AttemptFees {
                max_fee_per_gas: Some(2_000_000_000),
                max_priority_fee_per_gas: Some(1_000_000_000),
                gas_price: None,
                gas_limit: 21_000,
            },
        }
    }

    fn settings(bump: Option<f64>, cancel_when_stuck: bool) -> SubmitterSettings {
        SubmitterSettings {
            gas_bump: GasBump {
                enabled: bump.is_some(),
                multiplier: bump.unwrap_or(DEFAULT_BUMP_MULTIPLIER),
            },
            cancel_when_stuck,
            ..SubmitterSettings::default()
        }
    }

    #[test]
    fn without_a_bump_multiplier_a_due_intent_is_rebroadcast() {
        let c = claimed(TxState::Tracking, AttemptKind::Original);
        assert_eq!(plan(&c, &settings(None, false), Some(4)), Plan::Rebroadcast);
    }

    #[test]
    fn with_a_bump_multiplier_a_due_intent_is_bumped_and_a_cancel_stays_a_cancel() {
        let s = settings(Some(1.2), false);
        let c = claimed(TxState::Tracking, AttemptKind::Original);
        assert_eq!(
            plan(&c, &s, Some(4)),
            Plan::Replace {
                kind: AttemptKind::Bump,
                multiplier: 1.2
            }
        );
        let c = claimed(TxState::Tracking, AttemptKind::Cancel);
        assert_eq!(
            plan(&c, &s, Some(4)),
            Plan::Replace {
                kind: AttemptKind::Cancel,
                multiplier: 1.2
            }
        );
    }

    #[test]
    fn operator_requests_win_over_the_schedule() {
        let s = settings(None, false);
        let mut c = claimed(TxState::Tracking, AttemptKind::Original);
        c.requested = Some(OperatorAction::Cancel);
        assert_eq!(
            plan(&c, &s, Some(9)),
            Plan::Replace {
                kind: AttemptKind::Cancel,
                multiplier: s.gas_bump.multiplier
            }
        );
        c.requested = Some(OperatorAction::Speedup);
        assert_eq!(
            plan(&c, &s, Some(9)),
            Plan::Replace {
                kind: AttemptKind::Bump,
                multiplier: s.gas_bump.multiplier
            }
        );
        c.requested = Some(OperatorAction::Rebroadcast);
        assert_eq!(
            plan(&c, &settings(Some(1.5), false), Some(9)),
            Plan::Rebroadcast
        );
    }

    #[test]
    fn a_cancel_asked_again_while_one_is_out_signs_nothing_new_off_schedule() {
        let s = settings(Some(1.2), false);
        let mut c = claimed(TxState::Tracking, AttemptKind::Cancel);
        c.requested = Some(OperatorAction::Cancel);
        c.on_schedule = false;
        assert_eq!(plan(&c, &s, Some(4)), Plan::Rebroadcast);
        // Due on schedule as well: the cancel is bumped as any due one.
        c.on_schedule = true;
        assert_eq!(
            plan(&c, &s, Some(4)),
            Plan::Replace {
                kind: AttemptKind::Cancel,
                multiplier: 1.2
            }
        );
    }

    #[test]
    fn the_cancel_policy_cancels_only_the_stuck_head_of_the_line() {
        let s = settings(None, true);
        let c = claimed(TxState::Stuck, AttemptKind::Original);
        assert_eq!(
            plan(&c, &s, Some(4)),
            Plan::Replace {
                kind: AttemptKind::Cancel,
                multiplier: s.gas_bump.multiplier
            }
        );
        assert_eq!(plan(&c, &s, Some(3)), Plan::Rebroadcast, "not the head");
    }

    #[test]
    fn stuck_after_counts_from_the_first_broadcast_or_the_allocation() {
        let s = SubmitterSettings {
            stuck_after: Duration::from_secs(10),
            ..SubmitterSettings::default()
        };
        let mut c = claimed(TxState::Tracking, AttemptKind::Original);
        assert_eq!(stuck_reason(&c, &s), None);
        c.since_first_broadcast = Some(Duration::from_secs(10));
        assert_eq!(
            stuck_reason(&c, &s).map(|r| r.0),
            Some(SubState::StuckAfter)
        );
        let mut c = claimed(TxState::Allocated, AttemptKind::Original);
        c.since_first_broadcast = None;
        c.since_allocated = Some(Duration::from_secs(11));
        let (sub_state, reason) = stuck_reason(&c, &s).expect("stuck");
        assert_eq!(sub_state, SubState::StuckAfter);
        assert!(reason.contains("no node has accepted it"), "{reason}");
    }

    #[test]
    fn max_resubmits_counts_the_claim_itself() {
        let s = SubmitterSettings {
            max_resubmits: 2,
            stuck_after: Duration::from_secs(3600),
            ..SubmitterSettings::default()
        };
        let mut c = claimed(TxState::Tracking, AttemptKind::Original);
        c.resubmits = 2;
        assert_eq!(stuck_reason(&c, &s), None);
        c.resubmits = 3;
        assert_eq!(
            stuck_reason(&c, &s).map(|r| r.0),
            Some(SubState::StuckMaxResubmits)
        );
    }

    #[test]
    fn only_allocated_and_tracking_intents_become_stuck() {
        let s = SubmitterSettings {
            max_resubmits: 0,
            ..SubmitterSettings::default()
        };
        let mut c = claimed(TxState::Stuck, AttemptKind::Original);
        c.resubmits = 5;
        assert_eq!(stuck_reason(&c, &s), None);
    }
}
