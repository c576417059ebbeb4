//! Per-submitter knobs as the engine sees them (the daemon converts its
//! configuration into these).

use std::time::Duration;

use crate::chain::FinalityTag;

/// When a mined intent is final (DESIGN.md section 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    /// The receipt's block has this many confirmations (itself included).
    Confirmations(u64),
    /// The receipt's block is at or below the chain's `safe`/`finalized` block.
    Tag(FinalityTag),
}

/// How a submitter behaves. Cheap to clone; replaced whole on reload.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitterSettings {
    /// Intents in ALLOCATED/TRACKING/STUCK at once.
    pub max_in_flight: u32,
    /// Intents allocated, signed and broadcast per group commit.
    pub batch_size: u32,
    /// Creates waiting to be persisted before the handle answers `Overloaded`.
    pub ingress_capacity: u32,
    /// A mined intent keeps its in-flight slot until final (strict mode).
    pub hold_slot_until_final: bool,
    /// When a mined intent becomes CONFIRMED / FAILED_FINAL.
    pub finality: Finality,
    /// External use of the key stops the submitter (PROTECT) instead of adopting.
    pub protect_on_external_nonce: bool,
    /// Re-broadcast interval for accepted intents without a receipt.
    pub resubmit_interval: Duration,
    /// Resubmits without a receipt before an intent is STUCK.
    pub max_resubmits: u32,
    /// Time since the first accepted broadcast, without a receipt, before an
    /// intent is STUCK.
    pub stuck_after: Duration,
    /// A STUCK intent at the head of the nonce line is cancelled (a 0-value
    /// self-transfer at its nonce) instead of only reported.
    pub cancel_when_stuck: bool,
    /// Fee bumping on resubmit: `Some(multiplier)` when enabled (the factor
    /// actually applied is at least 1.10).
    pub bump_multiplier: Option<f64>,
    /// Factor of an operator's speed-up or a cancel when bumping is off.
    pub forced_bump_multiplier: f64,
    /// An intent never accepted (e.g. insufficient funds) is rejected after this.
    pub reject_after: Duration,
    /// Wait before retrying a broadcast whose outcome was a transient refusal.
    pub retry_backoff: Duration,
    /// Estimated gas × this margin, when the intent gives no gas limit.
    pub gas_limit_margin: f64,
    /// Legacy `gas_price` transactions instead of EIP-1559.
    pub legacy_fees: bool,
    /// Cap on `max_fee_per_gas` (EIP-1559).
    pub max_fee_per_gas_cap: Option<u128>,
    /// Cap on `max_priority_fee_per_gas` (EIP-1559).
    pub max_priority_fee_per_gas_cap: Option<u128>,
    /// Cap on the legacy gas price.
    pub gas_price_cap: Option<u128>,
}

impl Default for SubmitterSettings {
    fn default() -> Self {
        Self {
            max_in_flight: 16,
            batch_size: 64,
            ingress_capacity: 10_000,
            hold_slot_until_final: false,
            finality: Finality::Confirmations(12),
            protect_on_external_nonce: false,
            resubmit_interval: Duration::from_secs(60),
            max_resubmits: 20,
            stuck_after: Duration::from_secs(30 * 60),
            cancel_when_stuck: false,
            bump_multiplier: None,
            forced_bump_multiplier: 1.125,
            reject_after: Duration::from_secs(600),
            retry_backoff: Duration::from_secs(2),
            gas_limit_margin: 1.2,
            legacy_fees: false,
            max_fee_per_gas_cap: None,
            max_priority_fee_per_gas_cap: None,
            gas_price_cap: None,
        }
    }
}
