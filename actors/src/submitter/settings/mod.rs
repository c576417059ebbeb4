//! Per-submitter knobs: the one type the engine runs on and `config.toml`
//! deserialises (`[defaults]`, overridden per `[submitters."0x…"]` entry),
//! with every default written here once.
//!
//! Field names say what the engine does; the file keeps the documented
//! vocabulary (README "Configuration"), so four fields are renamed on the way:
//!
//! ```text
//! config.toml                             engine field
//! advance_after = "mined" | "confirmed"   hold_slot_until_final: bool
//! on_external_nonce = "adopt" | "protect" protect_on_external_nonce: bool
//! stuck_policy = "alert" | "cancel"       cancel_when_stuck: bool
//! fee_mode = "eip1559" | "legacy"         legacy_fees: bool
//! ```
//!
//! [`file_format`] holds those words and the wei amount syntax.

pub mod file_format;
mod policy;
mod policy_issues;

pub use policy::{Policy, PolicyViolation, Selector, SpendLimit, DEFAULT_SPEND_WAIT};

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::domain::Finality;

/// Default `max_in_flight`.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 16;
/// Default `batch_size`.
pub const DEFAULT_BATCH_SIZE: u32 = 64;
/// Largest allowed `batch_size`.
pub const MAX_BATCH_SIZE: u32 = 1000;
/// Default `ingress_capacity`.
pub const DEFAULT_INGRESS_CAPACITY: u32 = 10_000;
/// Default `resubmit_interval`.
pub const DEFAULT_RESUBMIT_INTERVAL: Duration = Duration::from_secs(60);
/// Default `max_resubmits`.
pub const DEFAULT_MAX_RESUBMITS: u32 = 20;
/// Default `stuck_after`.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(30 * 60);
/// Default `reject_after`.
pub const DEFAULT_REJECT_AFTER: Duration = Duration::from_secs(10 * 60);
/// Default `gas_limit_margin`.
pub const DEFAULT_GAS_LIMIT_MARGIN: f64 = 1.2;
/// Default `max_fee_per_gas_cap`: 1,000 gwei. A ceiling no fee reaches on
/// mainnet outside extreme spikes, so that no client-given fee and no chain
/// of bumps or speed-ups can spend without bound; a chain priced higher
/// (or an operator who wants another bound) sets its own.
pub const DEFAULT_MAX_FEE_PER_GAS_CAP: u128 = 1_000_000_000_000;
/// Default `gas_price_cap` (legacy fees): 1,000 gwei, as above.
pub const DEFAULT_GAS_PRICE_CAP: u128 = 1_000_000_000_000;
/// Default `gas_bump.multiplier`.
pub const DEFAULT_BUMP_MULTIPLIER: f64 = 1.125;
/// Smallest fee factor of a replacement: nodes refuse smaller ones (geth's
/// 10% rule), so a smaller configured multiplier is raised to this.
pub const MIN_BUMP_MULTIPLIER: f64 = 1.10;
/// Default `retry_backoff` where no chain poll interval is known (unit
/// tests); the daemon derives it with [`SubmitterSettings::retry_backoff_for`].
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(2);
/// Shortest `retry_backoff`, however fast the chain is polled.
pub const MIN_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// How a submitter behaves. Cheap to clone; replaced whole on reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubmitterSettings {
    /// Intents in ALLOCATED/TRACKING/STUCK at once (>= 1).
    pub max_in_flight: u32,
    /// Intents allocated, signed and broadcast per group commit (1..=1000).
    pub batch_size: u32,
    /// Creates waiting to be persisted before the handle answers `Overloaded`.
    pub ingress_capacity: u32,
    /// A mined intent keeps its in-flight slot until final, so the next
    /// nonce waits for finality (with `max_in_flight = 1`: strict mode).
    /// Written `advance_after = "confirmed"` (`"mined"` = false).
    #[serde(rename = "advance_after", with = "file_format::advance_after")]
    pub hold_slot_until_final: bool,
    /// External use of the key stops the submitter (PROTECT) instead of
    /// moving the cursor up. Written `on_external_nonce = "protect"`
    /// (`"adopt"` = false).
    #[serde(rename = "on_external_nonce", with = "file_format::on_external_nonce")]
    pub protect_on_external_nonce: bool,
    /// When a mined intent becomes CONFIRMED / FAILED_FINAL.
    pub finality: Finality,
    /// Re-broadcast interval for accepted intents without a receipt.
    #[serde(with = "humantime_serde")]
    pub resubmit_interval: Duration,
    /// Resubmits without a receipt before an intent is STUCK.
    pub max_resubmits: u32,
    /// Time since the first accepted broadcast, without a receipt, before an
    /// intent is STUCK.
    #[serde(with = "humantime_serde")]
    pub stuck_after: Duration,
    /// A STUCK intent at the head of the nonce line is cancelled (a 0-value
    /// self-transfer at its nonce) instead of only reported. Written
    /// `stuck_policy = "cancel"` (`"alert"` = false).
    #[serde(rename = "stuck_policy", with = "file_format::stuck_policy")]
    pub cancel_when_stuck: bool,
    /// An intent never accepted (e.g. insufficient funds) is rejected after this.
    #[serde(with = "humantime_serde")]
    pub reject_after: Duration,
    /// Estimated gas × this margin, when the intent gives no gas limit (>= 1.0).
    pub gas_limit_margin: f64,
    /// Legacy `gas_price` transactions instead of EIP-1559. Written
    /// `fee_mode = "legacy"` (`"eip1559"` = false).
    #[serde(rename = "fee_mode", with = "file_format::fee_mode")]
    pub legacy_fees: bool,
    /// Cap on `max_fee_per_gas` (EIP-1559), in wei; default
    /// [`DEFAULT_MAX_FEE_PER_GAS_CAP`]. It bounds the priority fee too.
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_fee_per_gas_cap: Option<u128>,
    /// Cap on `max_priority_fee_per_gas` (EIP-1559), in wei; `None` = uncapped.
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_priority_fee_per_gas_cap: Option<u128>,
    /// Cap on the legacy gas price, in wei; default [`DEFAULT_GAS_PRICE_CAP`].
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub gas_price_cap: Option<u128>,
    /// Fee bumping of resubmits, and the factor of forced replacements.
    pub gas_bump: GasBump,
    /// Balance (wei) below which the submitter reports `LOW_BALANCE` (and
    /// is topped up, with `top_up`); `None` = not monitored.
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_balance: Option<u128>,
    /// Refill from another configured submitter when the balance falls
    /// below `min_balance`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_up: Option<TopUp>,
    /// As a funder: the most wei this submitter sends in top-ups per rolling
    /// 24 hours, over every submitter it funds (each target's own
    /// `top_up.max_per_day` still applies); `None` = no funder-wide bound.
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub funding_max_per_day: Option<u128>,
    /// Send every transaction only to the chain's send-only endpoints (a
    /// private mempool), never to the public ones; an intent may also ask
    /// for it alone (`"private": true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private_sends: bool,
    /// Paused by the configuration: the leader allocates no nonce (each
    /// node's leader applies its own configuration; an operator's pause
    /// through the API is the cluster-wide one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// While paused, creates are accepted and wait QUEUED (true) or are
    /// refused with 423 `paused` (false).
    #[serde(default = "accepts_creates")]
    pub pause_accepts_creates: bool,
    /// What the submitter may be asked to send (README "Guardrails").
    #[serde(default, skip_serializing_if = "Policy::is_unrestricted")]
    pub policy: Policy,
    /// Wait before retrying a broadcast whose outcome was a transient
    /// refusal. Not a key: derived from `chain.poll_interval`.
    #[serde(skip)]
    pub retry_backoff: Duration,
}

/// `top_up = { from, target, max_per_day }`: when the balance falls below
/// `min_balance`, `from` (another configured submitter) sends an ordinary
/// intent bringing it back to `target`, at most `max_per_day` wei per
/// rolling 24 hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopUp {
    /// The funding submitter.
    pub from: alloy::primitives::Address,
    /// Balance a top-up aims for, in wei (above `min_balance`).
    #[serde(with = "file_format::wei")]
    pub target: u128,
    /// Most wei sent to this submitter per rolling 24 hours.
    #[serde(with = "file_format::wei")]
    pub max_per_day: u128,
    /// The funder's own `funding_max_per_day`, copied here when the
    /// configuration is resolved (not a key of the `top_up` table): the
    /// leader checks it with the rest of the top-up.
    #[serde(skip)]
    pub funder_max_per_day: Option<u128>,
}

/// `gas_bump = { enabled, multiplier }`: fee bumping of resubmits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GasBump {
    /// A resubmit signs a new attempt with higher fees instead of
    /// re-broadcasting the same bytes.
    pub enabled: bool,
    /// Factor applied to both fee fields (at least [`MIN_BUMP_MULTIPLIER`]
    /// is applied). Also the factor of an operator's speed-up or a cancel
    /// while automatic bumping is off.
    pub multiplier: f64,
}

impl GasBump {
    /// The factor of an automatic bump on resubmit; `None` = re-broadcast
    /// the same bytes.
    pub fn on_resubmit(&self) -> Option<f64> {
        self.enabled.then_some(self.multiplier)
    }
}

impl Default for GasBump {
    fn default() -> Self {
        Self {
            enabled: false,
            multiplier: DEFAULT_BUMP_MULTIPLIER,
        }
    }
}

impl Default for SubmitterSettings {
    fn default() -> Self {
        Self {
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            batch_size: DEFAULT_BATCH_SIZE,
            ingress_capacity: DEFAULT_INGRESS_CAPACITY,
            hold_slot_until_final: false,
            protect_on_external_nonce: false,
            finality: Finality::default(),
            resubmit_interval: DEFAULT_RESUBMIT_INTERVAL,
            max_resubmits: DEFAULT_MAX_RESUBMITS,
            stuck_after: DEFAULT_STUCK_AFTER,
            cancel_when_stuck: false,
            reject_after: DEFAULT_REJECT_AFTER,
            gas_limit_margin: DEFAULT_GAS_LIMIT_MARGIN,
            legacy_fees: false,
            max_fee_per_gas_cap: Some(DEFAULT_MAX_FEE_PER_GAS_CAP),
            max_priority_fee_per_gas_cap: None,
            gas_price_cap: Some(DEFAULT_GAS_PRICE_CAP),
            gas_bump: GasBump::default(),
            min_balance: None,
            top_up: None,
            funding_max_per_day: None,
            private_sends: false,
            paused: false,
            pause_accepts_creates: true,
            policy: Policy::default(),
            retry_backoff: DEFAULT_RETRY_BACKOFF,
        }
    }
}

/// `pause_accepts_creates` when unset.
fn accepts_creates() -> bool {
    true
}

impl SubmitterSettings {
    /// Strict mode: one nonce at a time, each final before the next.
    pub fn is_strict(&self) -> bool {
        self.max_in_flight == 1 && self.hold_slot_until_final
    }

    /// These settings for an attempt of `gas_limit`: the per-gas caps
    /// lowered so that `gas_limit ×` the fee stays within the policy's
    /// `max_fee_per_tx` (unchanged without that rule).
    pub fn for_gas_limit(&self, gas_limit: u64) -> std::borrow::Cow<'_, SubmitterSettings> {
        let Some(per_gas) = self.policy.fee_per_gas_cap(gas_limit) else {
            return std::borrow::Cow::Borrowed(self);
        };
        let lower = |cap: Option<u128>| Some(cap.map_or(per_gas, |c| c.min(per_gas)));
        let mut capped = self.clone();
        capped.max_fee_per_gas_cap = lower(self.max_fee_per_gas_cap);
        capped.gas_price_cap = lower(self.gas_price_cap);
        std::borrow::Cow::Owned(capped)
    }

    /// `retry_backoff` for a chain polled every `poll_interval`: retrying
    /// sooner than the next poll learns nothing new.
    pub fn retry_backoff_for(poll_interval: Duration) -> Duration {
        poll_interval.max(MIN_RETRY_BACKOFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_keeps_its_documented_words_and_round_trips() {
        let settings: SubmitterSettings = serde_json::from_value(serde_json::json!({
            "advance_after": "confirmed",
            "on_external_nonce": "protect",
            "stuck_policy": "cancel",
            "fee_mode": "legacy",
            "max_in_flight": 1,
            "gas_price_cap": "0x174876e800",
            "gas_bump": { "enabled": true },
        }))
        .expect("documented keys");
        assert!(settings.is_strict());
        assert!(settings.protect_on_external_nonce);
        assert!(settings.cancel_when_stuck);
        assert!(settings.legacy_fees);
        assert_eq!(settings.gas_price_cap, Some(100_000_000_000));
        assert_eq!(
            settings.gas_bump.on_resubmit(),
            Some(DEFAULT_BUMP_MULTIPLIER)
        );
        assert_eq!(settings.retry_backoff, DEFAULT_RETRY_BACKOFF);

        let shown = serde_json::to_value(&settings).expect("ser");
        assert_eq!(shown["advance_after"], "confirmed");
        assert_eq!(shown["stuck_policy"], "cancel");
        assert_eq!(shown["gas_price_cap"], "100000000000");
        assert!(shown.get("retry_backoff").is_none(), "not a key: {shown}");
        let back: SubmitterSettings = serde_json::from_value(shown).expect("de");
        assert_eq!(back, settings);
    }

    #[test]
    fn engine_field_names_are_not_keys() {
        let err = serde_json::from_value::<SubmitterSettings>(
            serde_json::json!({ "hold_slot_until_final": true }),
        )
        .expect_err("unknown key");
        assert!(err.to_string().contains("advance_after"), "{err}");
    }

    #[test]
    fn retry_backoff_follows_the_poll_interval_with_a_floor() {
        assert_eq!(
            SubmitterSettings::retry_backoff_for(Duration::from_millis(100)),
            MIN_RETRY_BACKOFF
        );
        assert_eq!(
            SubmitterSettings::retry_backoff_for(Duration::from_secs(3)),
            Duration::from_secs(3)
        );
    }
}
