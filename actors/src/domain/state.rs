//! Why a signed attempt exists (the lifecycle states themselves are the
//! API's: [`txmgr_api::TxState`], re-exported by [`crate::domain`]).

use serde::{Deserialize, Serialize};

/// Why a signed attempt exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    /// The first signature of the intent.
    Original,
    /// Same intent re-signed without a fee change (e.g. after recovery).
    Rebroadcast,
    /// Same nonce and intent with raised fees.
    Bump,
    /// A 0-value self-transfer at the same nonce that replaces the intent.
    Cancel,
}

impl AttemptKind {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Original => "original",
            AttemptKind::Rebroadcast => "rebroadcast",
            AttemptKind::Bump => "bump",
            AttemptKind::Cancel => "cancel",
        }
    }
}
