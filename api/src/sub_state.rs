//! The finer detail within an intent's state (`managed_tx.sub_state`).
//!
//! Stored as text. The constraint `managed_tx_sub_state_known` (migration
//! `20261128000001_sub_state_values`) refuses any other value, so this list
//! and that one change together — and a value once written stays in both:
//! rows keep it.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// Why an intent is where it is, beyond its [`TxState`](crate::TxState).
/// Serialised (API, JSON) as the same text it is stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubState {
    /// TRACKING: a node accepted an attempt; no receipt yet.
    AwaitingReceipt,
    /// TRACKING or STUCK: a receipt is recorded; finality decides.
    Mined,
    /// TRACKING or STUCK: the receipt's block left the canonical chain; the
    /// mined bytes are re-broadcast.
    Reorged,
    /// A replacement with raised fees was signed and persisted.
    FeeBumped,
    /// A cancel (0-value self-transfer at the nonce) was signed and persisted.
    Cancelling,
    /// A fee bump was due but the caps leave no room: re-broadcast instead.
    FeeCapReached,
    /// A cancel was due but the caps leave no room: re-broadcast instead.
    CancelAtFeeCap,
    /// STUCK: no receipt within `stuck_after`.
    #[serde(rename = "stuck_stuck_after")]
    StuckAfter,
    /// STUCK: no receipt after `max_resubmits` resubmits.
    StuckMaxResubmits,
    /// A transaction that is not ours consumed the nonce; the intent never
    /// executed (QUEUED again under `adopt`, STUCK under `protect`).
    NonceConsumedExternally,
    /// CANCELLED by an operator before it held a nonce on chain.
    CancelledByOperator,
    /// QUEUED again by an operator after its nonce was consumed externally.
    RequeuedByOperator,
    /// A filler: a 0-value self-transfer taking a released nonce.
    Filler,
    /// REJECTED filler: its nonce went to another transaction.
    FillerNotIncluded,
    /// REJECTED: its `valid_until` passed before it was given a nonce; or
    /// CANCELLED: the cancel sent at its deadline was mined.
    Expired,
    /// QUEUED waiting for room under the submitter's `spend_limit`; or
    /// REJECTED after waiting `spend_wait`.
    SpendLimited,
    /// QUEUED while its submitter is paused (an operator's pause, or
    /// `paused = true` in the answering node's configuration). Shown by
    /// the reads, from the pause itself; not written on the rows, so it
    /// holds for creates accepted during the pause and ends at the resume.
    Paused,
}

impl SubState {
    /// Every sub-state, each with the text it is stored as.
    pub const ALL: [SubState; 17] = [
        SubState::AwaitingReceipt,
        SubState::Mined,
        SubState::Reorged,
        SubState::FeeBumped,
        SubState::Cancelling,
        SubState::FeeCapReached,
        SubState::CancelAtFeeCap,
        SubState::StuckAfter,
        SubState::StuckMaxResubmits,
        SubState::NonceConsumedExternally,
        SubState::CancelledByOperator,
        SubState::RequeuedByOperator,
        SubState::Filler,
        SubState::FillerNotIncluded,
        SubState::Expired,
        SubState::SpendLimited,
        SubState::Paused,
    ];

    /// The text stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            SubState::AwaitingReceipt => "awaiting_receipt",
            SubState::Mined => "mined",
            SubState::Reorged => "reorged",
            SubState::FeeBumped => "fee_bumped",
            SubState::Cancelling => "cancelling",
            SubState::FeeCapReached => "fee_cap_reached",
            SubState::CancelAtFeeCap => "cancel_at_fee_cap",
            // Written as `stuck_` + the setting's name since the first
            // release; rows keep it.
            SubState::StuckAfter => "stuck_stuck_after",
            SubState::StuckMaxResubmits => "stuck_max_resubmits",
            SubState::NonceConsumedExternally => "nonce_consumed_externally",
            SubState::CancelledByOperator => "cancelled_by_operator",
            SubState::RequeuedByOperator => "requeued_by_operator",
            SubState::Filler => "filler",
            SubState::FillerNotIncluded => "filler_not_included",
            SubState::Expired => "expired",
            SubState::SpendLimited => "spend_limited",
            SubState::Paused => "paused",
        }
    }

    /// Reads a stored or sent name.
    pub fn parse(name: &str) -> Result<Self, UnknownSubState> {
        SubState::ALL
            .into_iter()
            .find(|sub_state| sub_state.as_str() == name)
            .ok_or_else(|| UnknownSubState(name.to_owned()))
    }
}

impl fmt::Display for SubState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sub-state name that is not one of [`SubState::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sub-state {0:?}")]
pub struct UnknownSubState(pub String);

impl FromStr for SubState {
    type Err = UnknownSubState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SubState::parse(s)
    }
}

/// The column's text, read and written by the daemon's store.
#[cfg(feature = "sqlx")]
mod column {
    use sqlx::{
        encode::IsNull,
        error::BoxDynError,
        postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
        Decode, Encode, Postgres, Type,
    };

    use super::SubState;

    impl Type<Postgres> for SubState {
        fn type_info() -> PgTypeInfo {
            <&str as Type<Postgres>>::type_info()
        }

        fn compatible(ty: &PgTypeInfo) -> bool {
            <&str as Type<Postgres>>::compatible(ty)
        }
    }

    impl Encode<'_, Postgres> for SubState {
        fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
            <&str as Encode<Postgres>>::encode(self.as_str(), buf)
        }
    }

    impl Decode<'_, Postgres> for SubState {
        fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
            Ok(SubState::parse(<&str as Decode<Postgres>>::decode(value)?)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_serde_writes_the_stored_text() {
        for sub_state in SubState::ALL {
            assert_eq!(SubState::parse(sub_state.as_str()), Ok(sub_state));
            let json = serde_json::to_value(sub_state).expect("serialises");
            assert_eq!(json, serde_json::Value::from(sub_state.as_str()));
            let back: SubState = serde_json::from_value(json).expect("deserialises");
            assert_eq!(back, sub_state);
        }
        assert!(SubState::parse("MINED").is_err());
        assert!(SubState::parse("final").is_err());
    }

    #[test]
    fn every_name_fits_the_original_column_check() {
        // migrations/20261125000001_init.sql: sub_state ~ '^[a-z_]{1,32}$'.
        for sub_state in SubState::ALL {
            let name = sub_state.as_str();
            assert!((1..=32).contains(&name.len()), "{name}");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }
}
