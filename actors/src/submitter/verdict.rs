//! What a broadcast answer means for its intent: a pure function of the
//! attempt and the node's classified answer, so every rule is unit-tested
//! without a node or a database.

use std::time::Duration;

use crate::{chain::BroadcastClass, domain::TxState, store::pipeline::PendingAttempt};

/// The decision for one attempt after one send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A node holds it: TRACKING (label: `accepted` or `already_known`).
    Accepted(&'static str),
    /// Not accepted yet: stays as it is, sent again after the retry delay.
    Retry {
        /// The node's answer, kept as the intent's last error.
        error: String,
        /// The answer was unknown: the bytes may be in a pool from now on.
        unknown: bool,
        /// The nonce is consumed on chain: the sweep must look now.
        nonce_too_low: bool,
    },
    /// Refused for good and no send of it can have reached a pool:
    /// REJECTED, the nonce released.
    Reject(String),
}

/// Decides one attempt's fate from the node's answer. `error` is the
/// answer's text (empty for an acceptance); `reject_after` bounds how long
/// an intent that was never accepted waits for funds.
pub(crate) fn judge(
    attempt: &PendingAttempt,
    class: &BroadcastClass,
    error: String,
    reject_after: Duration,
) -> Verdict {
    if class.counts_as_accepted() {
        return Verdict::Accepted(class.label());
    }
    let never_accepted = attempt.state == TxState::Allocated;
    // A nonce is released only when no send of it could have reached a
    // pool: an unknown answer, now or earlier, keeps it.
    let releasable = never_accepted && !attempt.maybe_pooled;
    let unknown = matches!(class, BroadcastClass::Transient);
    let retry = |error: String| Verdict::Retry {
        error,
        unknown,
        nonce_too_low: matches!(class, BroadcastClass::NonceTooLow),
    };
    match class {
        BroadcastClass::NonceTooLow => retry(error),
        c if c.is_definitive_refusal() && releasable => Verdict::Reject(error),
        BroadcastClass::InsufficientFunds if releasable && attempt.age >= reject_after => {
            Verdict::Reject(format!("never accepted within reject_after: {error}"))
        }
        // Refused now, but an earlier send's answer was unknown: the bytes
        // may still be mined, so the nonce is kept and the intent escalates
        // (bump, STUCK) like any other.
        c if c.is_definitive_refusal() && never_accepted => retry(format!(
            "{error} (nonce kept: an earlier send's answer was unknown)"
        )),
        _ => retry(error),
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Bytes, B256};
    use uuid::Uuid;

    use super::*;
    use crate::chain::InvalidReason;

    const REJECT_AFTER: Duration = Duration::from_secs(60);

    fn attempt(state: TxState, maybe_pooled: bool, age: Duration) -> PendingAttempt {
        PendingAttempt {
            tx_id: Uuid::nil(),
            nonce: 7,
            state,
            tx_hash: B256::ZERO,
            raw: Bytes::new(),
            age,
            maybe_pooled,
            private: false,
        }
    }

    fn fresh() -> PendingAttempt {
        attempt(TxState::Allocated, false, Duration::ZERO)
    }

    fn invalid() -> BroadcastClass {
        BroadcastClass::Invalid(InvalidReason::InvalidSignature)
    }

    #[test]
    fn accepted_and_already_known_track() {
        let v = judge(
            &fresh(),
            &BroadcastClass::Accepted,
            String::new(),
            REJECT_AFTER,
        );
        assert_eq!(v, Verdict::Accepted("accepted"));
        let v = judge(
            &fresh(),
            &BroadcastClass::AlreadyKnown,
            "known".into(),
            REJECT_AFTER,
        );
        assert_eq!(v, Verdict::Accepted("already_known"));
    }

    #[test]
    fn a_definitive_refusal_of_a_never_sent_attempt_rejects() {
        let v = judge(&fresh(), &invalid(), "bad".into(), REJECT_AFTER);
        assert_eq!(v, Verdict::Reject("bad".into()));
    }

    #[test]
    fn a_definitive_refusal_after_an_unknown_answer_keeps_the_nonce() {
        let a = attempt(TxState::Allocated, true, Duration::ZERO);
        match judge(
            &a,
            &BroadcastClass::TxFeeExceedsCap,
            "cap".into(),
            REJECT_AFTER,
        ) {
            Verdict::Retry { error, unknown, .. } => {
                assert!(error.contains("nonce kept"), "{error}");
                assert!(!unknown);
            }
            other => panic!("expected a retry, got {other:?}"),
        }
    }

    #[test]
    fn a_refusal_of_an_accepted_intent_never_rejects() {
        let a = attempt(TxState::Tracking, false, Duration::ZERO);
        let v = judge(&a, &invalid(), "bad".into(), REJECT_AFTER);
        assert!(matches!(v, Verdict::Retry { .. }), "{v:?}");
    }

    #[test]
    fn transient_answers_are_unknown_and_retried() {
        let v = judge(
            &fresh(),
            &BroadcastClass::Transient,
            "timeout".into(),
            REJECT_AFTER,
        );
        assert_eq!(
            v,
            Verdict::Retry {
                error: "timeout".into(),
                unknown: true,
                nonce_too_low: false
            }
        );
    }

    #[test]
    fn nonce_too_low_asks_for_a_sweep_and_never_rejects() {
        let v = judge(
            &fresh(),
            &BroadcastClass::NonceTooLow,
            "low".into(),
            REJECT_AFTER,
        );
        assert_eq!(
            v,
            Verdict::Retry {
                error: "low".into(),
                unknown: false,
                nonce_too_low: true
            }
        );
    }

    #[test]
    fn insufficient_funds_waits_until_reject_after() {
        let young = attempt(TxState::Allocated, false, REJECT_AFTER / 2);
        let v = judge(
            &young,
            &BroadcastClass::InsufficientFunds,
            "funds".into(),
            REJECT_AFTER,
        );
        assert!(matches!(v, Verdict::Retry { .. }), "{v:?}");
        let old = attempt(TxState::Allocated, false, REJECT_AFTER);
        let v = judge(
            &old,
            &BroadcastClass::InsufficientFunds,
            "funds".into(),
            REJECT_AFTER,
        );
        assert!(matches!(v, Verdict::Reject(r) if r.contains("reject_after")));
        let pooled = attempt(TxState::Allocated, true, REJECT_AFTER);
        let v = judge(
            &pooled,
            &BroadcastClass::InsufficientFunds,
            "funds".into(),
            REJECT_AFTER,
        );
        assert!(matches!(v, Verdict::Retry { .. }), "{v:?}");
    }

    #[test]
    fn pool_pressure_is_retried() {
        for class in [
            BroadcastClass::Underpriced,
            BroadcastClass::ReplacementUnderpriced,
            BroadcastClass::PoolFull,
            BroadcastClass::NonceTooHigh,
            BroadcastClass::FeeCapTooLow,
        ] {
            let v = judge(&fresh(), &class, "x".into(), REJECT_AFTER);
            assert!(
                matches!(v, Verdict::Retry { unknown: false, .. }),
                "{class:?}: {v:?}"
            );
        }
    }
}
