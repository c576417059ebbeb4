//! What a submitter's policy answers when it refuses an intent: the create
//! error carries it to the edge (HTTP 403 `policy_violation`), and the
//! policy itself (`submitter::settings::Policy`) produces it.

/// A create the policy refuses: nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy {rule}: {detail}")]
pub struct PolicyViolation {
    /// The rule (its key in `policy`).
    pub rule: &'static str,
    /// The request field it judged.
    pub field: &'static str,
    /// What was refused.
    pub detail: String,
}
