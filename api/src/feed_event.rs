//! What a completion-feed row reports: a transaction entering a terminal
//! state (or STUCK), or a submitter's balance crossing its threshold.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::TxState;

/// The event of one feed row (its `state` field).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FeedEvent {
    /// The transaction confirmed at finality.
    Confirmed,
    /// The transaction reverted at finality.
    FailedFinal,
    /// The intent never used a nonce on chain.
    Rejected,
    /// The intent was cancelled.
    Cancelled,
    /// The transaction is stuck (may still confirm, and then appears again).
    Stuck,
    /// A correction: the block holding a transaction reported final
    /// (CONFIRMED, FAILED_FINAL, CANCELLED) left the canonical chain — a
    /// reorg deeper than the finality setting. The intent is tracked again
    /// (its signed bytes re-broadcast) and its new terminal row follows.
    ReorgedOut,
    /// The submitter's balance fell below its `min_balance`.
    LowBalance,
    /// The submitter's balance is at or above its `min_balance` again.
    BalanceRestored,
}

impl FeedEvent {
    /// Every event, transaction events first.
    pub const ALL: [FeedEvent; 8] = [
        FeedEvent::Confirmed,
        FeedEvent::FailedFinal,
        FeedEvent::Rejected,
        FeedEvent::Cancelled,
        FeedEvent::Stuck,
        FeedEvent::ReorgedOut,
        FeedEvent::LowBalance,
        FeedEvent::BalanceRestored,
    ];

    /// The stored and serialised name (`FAILED_FINAL`, `LOW_BALANCE`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FeedEvent::Confirmed => "CONFIRMED",
            FeedEvent::FailedFinal => "FAILED_FINAL",
            FeedEvent::Rejected => "REJECTED",
            FeedEvent::Cancelled => "CANCELLED",
            FeedEvent::Stuck => "STUCK",
            FeedEvent::ReorgedOut => "REORGED_OUT",
            FeedEvent::LowBalance => "LOW_BALANCE",
            FeedEvent::BalanceRestored => "BALANCE_RESTORED",
        }
    }

    /// True for the funds events (no transaction behind them).
    pub fn is_funds(self) -> bool {
        matches!(self, FeedEvent::LowBalance | FeedEvent::BalanceRestored)
    }

    /// The feed event of entering `state`, if entering it is reported.
    pub fn of_state(state: TxState) -> Option<FeedEvent> {
        match state {
            TxState::Confirmed => Some(FeedEvent::Confirmed),
            TxState::FailedFinal => Some(FeedEvent::FailedFinal),
            TxState::Rejected => Some(FeedEvent::Rejected),
            TxState::Cancelled => Some(FeedEvent::Cancelled),
            TxState::Stuck => Some(FeedEvent::Stuck),
            TxState::Queued | TxState::Allocated | TxState::Tracking => None,
        }
    }
}

impl fmt::Display for FeedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a feed event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event {0:?}: expected one of CONFIRMED, FAILED_FINAL, REJECTED, CANCELLED, STUCK, REORGED_OUT, LOW_BALANCE, BALANCE_RESTORED")]
pub struct UnknownFeedEvent(pub String);

impl FromStr for FeedEvent {
    type Err = UnknownFeedEvent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FeedEvent::ALL
            .into_iter()
            .find(|event| event.as_str() == s)
            .ok_or_else(|| UnknownFeedEvent(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for event in FeedEvent::ALL {
            assert_eq!(event.as_str().parse::<FeedEvent>(), Ok(event));
            let json = serde_json::to_string(&event).expect("serialises");
            assert_eq!(json, format!("\"{event}\""));
        }
        assert!("QUEUED".parse::<FeedEvent>().is_err());
    }

    #[test]
    fn transaction_events_are_the_reported_states() {
        for state in TxState::ALL {
            if let Some(event) = FeedEvent::of_state(state) {
                assert_eq!(event.as_str(), state.as_str());
                assert!(!event.is_funds());
            }
        }
    }
}
