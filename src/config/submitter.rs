//! Per-submitter settings: the knobs of `[defaults]`, which every
//! `[submitters."0x…"]` entry may override (see `overrides.rs`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::values::{Finality, Wei};

/// Default cap on intents in ALLOCATED/TRACKING at once.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 16;
/// Default number of intents allocated in one fenced transaction.
pub const DEFAULT_BATCH_SIZE: u32 = 64;
/// Largest allowed `batch_size`.
pub const MAX_BATCH_SIZE: u32 = 1000;
/// Default bound on intents accepted but not yet persisted for a submitter.
pub const DEFAULT_INGRESS_CAPACITY: u32 = 10_000;
/// Default wait without a receipt before re-broadcasting.
pub const DEFAULT_RESUBMIT_INTERVAL: Duration = Duration::from_secs(60);
/// Default number of resubmits before a transaction is STUCK.
pub const DEFAULT_MAX_RESUBMITS: u32 = 20;
/// Default age after which a transaction without a receipt is STUCK.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(30 * 60);
/// Default time a never-accepted transaction may keep retrying before it is
/// REJECTED and its nonce released.
pub const DEFAULT_REJECT_AFTER: Duration = Duration::from_secs(10 * 60);
/// Default factor applied to the gas estimate.
pub const DEFAULT_GAS_LIMIT_MARGIN: f64 = 1.2;
/// Default fee bump factor.
pub const DEFAULT_BUMP_MULTIPLIER: f64 = 1.125;
/// Smallest bump factor nodes accept for a replacement (geth's 10% rule).
pub const MIN_BUMP_MULTIPLIER: f64 = 1.10;

/// When the next nonce may be assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdvanceAfter {
    /// As soon as earlier transactions are mined (pipelined).
    #[default]
    Mined,
    /// Only after earlier transactions are final; with `max_in_flight = 1`
    /// this is strict mode.
    Confirmed,
}

/// What to do when the chain shows a nonce we did not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExternalNonce {
    /// Move the cursor up to the chain's pending nonce and carry on.
    #[default]
    Adopt,
    /// Stop allocating and alert until an operator unprotects.
    Protect,
}

/// What to do with a transaction that became STUCK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StuckPolicy {
    /// Record, count and log it; keep re-broadcasting.
    #[default]
    Alert,
    /// Send a 0-value self-transfer at the same nonce with bumped fees.
    Cancel,
}

/// How fees are priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeeMode {
    /// EIP-1559 `max_fee_per_gas` / `max_priority_fee_per_gas`.
    #[default]
    Eip1559,
    /// Pre-1559 `gas_price`, for chains without a base fee.
    Legacy,
}

/// Fee bumping of resubmitted transactions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GasBump {
    /// Whether a resubmit signs a new attempt with higher fees instead of
    /// re-broadcasting the same bytes.
    pub enabled: bool,
    /// Factor applied to both fee fields; at least 1.10 when enabled, since
    /// nodes refuse smaller replacements.
    pub multiplier: f64,
}

impl Default for GasBump {
    fn default() -> Self {
        Self {
            enabled: false,
            multiplier: DEFAULT_BUMP_MULTIPLIER,
        }
    }
}

/// Every per-submitter knob, fully resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubmitterSettings {
    /// Intents in ALLOCATED/TRACKING at once (>= 1).
    pub max_in_flight: u32,
    /// Intents allocated per fenced transaction (1..=1000).
    pub batch_size: u32,
    /// Intents accepted but not yet persisted before creates get Busy (>= 1).
    pub ingress_capacity: u32,
    /// When the next nonce may be assigned.
    pub advance_after: AdvanceAfter,
    /// Reaction to a nonce used outside txmgr.
    pub on_external_nonce: OnExternalNonce,
    /// When a mined transaction is final.
    pub finality: Finality,
    /// Wait without a receipt before a resubmit.
    #[serde(with = "humantime_serde")]
    pub resubmit_interval: Duration,
    /// Resubmits before a transaction is STUCK.
    pub max_resubmits: u32,
    /// Age without a receipt before a transaction is STUCK.
    #[serde(with = "humantime_serde")]
    pub stuck_after: Duration,
    /// Reaction to a STUCK transaction.
    pub stuck_policy: StuckPolicy,
    /// How long a never-accepted transaction retries before REJECTED.
    #[serde(with = "humantime_serde")]
    pub reject_after: Duration,
    /// Factor applied to the gas estimate (>= 1.0).
    pub gas_limit_margin: f64,
    /// EIP-1559 or legacy pricing.
    pub fee_mode: FeeMode,
    /// Upper bound on `max_fee_per_gas`; `None` = uncapped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fee_per_gas_cap: Option<Wei>,
    /// Upper bound on `max_priority_fee_per_gas`; `None` = uncapped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_priority_fee_per_gas_cap: Option<Wei>,
    /// Upper bound on legacy `gas_price`; `None` = uncapped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gas_price_cap: Option<Wei>,
    /// Fee bumping on resubmit.
    pub gas_bump: GasBump,
}

impl Default for SubmitterSettings {
    fn default() -> Self {
        Self {
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            batch_size: DEFAULT_BATCH_SIZE,
            ingress_capacity: DEFAULT_INGRESS_CAPACITY,
            advance_after: AdvanceAfter::default(),
            on_external_nonce: OnExternalNonce::default(),
            finality: Finality::default(),
            resubmit_interval: DEFAULT_RESUBMIT_INTERVAL,
            max_resubmits: DEFAULT_MAX_RESUBMITS,
            stuck_after: DEFAULT_STUCK_AFTER,
            stuck_policy: StuckPolicy::default(),
            reject_after: DEFAULT_REJECT_AFTER,
            gas_limit_margin: DEFAULT_GAS_LIMIT_MARGIN,
            fee_mode: FeeMode::default(),
            max_fee_per_gas_cap: None,
            max_priority_fee_per_gas_cap: None,
            gas_price_cap: None,
            gas_bump: GasBump::default(),
        }
    }
}

impl SubmitterSettings {
    /// Strict mode: one nonce at a time, each final before the next.
    pub fn is_strict(&self) -> bool {
        self.max_in_flight == 1 && self.advance_after == AdvanceAfter::Confirmed
    }
}
