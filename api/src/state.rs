//! The lifecycle states of an intent (README "How an intent is executed").
//!
//! The database enforces the same sets with CHECK constraints; these enums
//! are the only way code names them.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// Lifecycle state of a managed transaction (an intent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TxState {
    /// Durable intent without a nonce.
    Queued,
    /// Nonce assigned and attempt signed and persisted; no node accepted it yet.
    Allocated,
    /// A node accepted at least one attempt; waiting for a final receipt.
    Tracking,
    /// Not mined within the configured bounds; still tracked and may confirm.
    Stuck,
    /// Receipt status 1 at finality. Terminal.
    Confirmed,
    /// Receipt status 0 at finality; the nonce is consumed. Terminal.
    FailedFinal,
    /// Never used a nonce on chain. Terminal.
    Rejected,
    /// Cancelled before a nonce, or our cancel attempt is final. Terminal.
    Cancelled,
}

impl TxState {
    /// Every state, in lifecycle order.
    pub const ALL: [TxState; 8] = [
        TxState::Queued,
        TxState::Allocated,
        TxState::Tracking,
        TxState::Stuck,
        TxState::Confirmed,
        TxState::FailedFinal,
        TxState::Rejected,
        TxState::Cancelled,
    ];

    /// The name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            TxState::Queued => "QUEUED",
            TxState::Allocated => "ALLOCATED",
            TxState::Tracking => "TRACKING",
            TxState::Stuck => "STUCK",
            TxState::Confirmed => "CONFIRMED",
            TxState::FailedFinal => "FAILED_FINAL",
            TxState::Rejected => "REJECTED",
            TxState::Cancelled => "CANCELLED",
        }
    }

    /// Terminal states never change again and each wrote a completion row.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TxState::Confirmed | TxState::FailedFinal | TxState::Rejected | TxState::Cancelled
        )
    }

    /// States that hold a nonce and occupy an in-flight slot.
    pub fn holds_nonce_in_flight(self) -> bool {
        matches!(
            self,
            TxState::Allocated | TxState::Tracking | TxState::Stuck
        )
    }
}

impl fmt::Display for TxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of [`TxState::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown transaction state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for TxState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TxState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip() {
        for state in TxState::ALL {
            assert_eq!(state.as_str().parse::<TxState>().ok(), Some(state));
        }
        assert!("queued".parse::<TxState>().is_err());
    }

    #[test]
    fn terminal_states_do_not_hold_nonces_in_flight() {
        for state in TxState::ALL {
            assert!(!(state.is_terminal() && state.holds_nonce_in_flight()));
        }
    }
}
