//! Overrides of the `[defaults]` knobs, at three places: a chain's
//! `[chains.X].defaults`, a `[submitters."0x…"]` entry (with its signer and
//! chains), and that entry's `[submitters."0x…".on.X]`; and their merge into
//! [`ResolvedSubmitter`].
//!
//! The override fields are declared once, in [`settings_overrides!`], and
//! spelled out in each struct rather than `#[serde(flatten)]`ed, because
//! serde cannot combine `flatten` with `deny_unknown_fields`, and a misspelt
//! override must be an error, not a silent default. Each field has the name,
//! file key and file syntax of its [`SubmitterSettings`] field.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use alloy::primitives::Address;

use serde::{Deserialize, Serialize};
use txmgr_actors::{
    domain::Finality,
    submitter::{
        settings::{file_format, Policy, Selector, SpendLimit, TopUp},
        GasBump, SubmitterSettings,
    },
};

use super::signer::SignerSpec;

/// Declares a struct with the given fields followed by every override of a
/// `[defaults]` knob, and its `merged_settings` (unset fields inherit) and
/// `has_overrides`.
macro_rules! settings_overrides {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            /// Overrides `defaults.max_in_flight`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_in_flight: Option<u32>,
            /// Overrides `defaults.batch_size`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub batch_size: Option<u32>,
            /// Overrides `defaults.ingress_capacity`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ingress_capacity: Option<u32>,
            /// Overrides `defaults.advance_after`.
            #[serde(
                rename = "advance_after",
                default,
                with = "file_format::advance_after::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub hold_slot_until_final: Option<bool>,
            /// Overrides `defaults.on_external_nonce`.
            #[serde(
                rename = "on_external_nonce",
                default,
                with = "file_format::on_external_nonce::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub protect_on_external_nonce: Option<bool>,
            /// Overrides `defaults.finality`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub finality: Option<Finality>,
            /// Overrides `defaults.resubmit_interval`.
            #[serde(
                default,
                with = "humantime_serde::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub resubmit_interval: Option<Duration>,
            /// Overrides `defaults.max_resubmits`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_resubmits: Option<u32>,
            /// Overrides `defaults.stuck_after`.
            #[serde(
                default,
                with = "humantime_serde::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub stuck_after: Option<Duration>,
            /// Overrides `defaults.stuck_policy`.
            #[serde(
                rename = "stuck_policy",
                default,
                with = "file_format::stuck_policy::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub cancel_when_stuck: Option<bool>,
            /// Overrides `defaults.reject_after`.
            #[serde(
                default,
                with = "humantime_serde::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub reject_after: Option<Duration>,
            /// Overrides `defaults.gas_limit_margin`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub gas_limit_margin: Option<f64>,
            /// Overrides `defaults.fee_mode`.
            #[serde(
                rename = "fee_mode",
                default,
                with = "file_format::fee_mode::option",
                skip_serializing_if = "Option::is_none"
            )]
            pub legacy_fees: Option<bool>,
            /// Overrides `defaults.max_fee_per_gas_cap`.
            #[serde(
                default,
                with = "file_format::wei_option",
                skip_serializing_if = "Option::is_none"
            )]
            pub max_fee_per_gas_cap: Option<u128>,
            /// Overrides `defaults.max_priority_fee_per_gas_cap`.
            #[serde(
                default,
                with = "file_format::wei_option",
                skip_serializing_if = "Option::is_none"
            )]
            pub max_priority_fee_per_gas_cap: Option<u128>,
            /// Overrides `defaults.gas_price_cap`.
            #[serde(
                default,
                with = "file_format::wei_option",
                skip_serializing_if = "Option::is_none"
            )]
            pub gas_price_cap: Option<u128>,
            /// Overrides parts of `defaults.gas_bump`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub gas_bump: Option<GasBumpOverride>,
            /// Overrides `min_balance`.
            #[serde(
                default,
                with = "file_format::wei_option",
                skip_serializing_if = "Option::is_none"
            )]
            pub min_balance: Option<u128>,
            /// Overrides `top_up`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub top_up: Option<TopUp>,
            /// Overrides `defaults.private_sends`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub private_sends: Option<bool>,
            /// Overrides `funding_max_per_day`.
            #[serde(
                default,
                with = "file_format::wei_option",
                skip_serializing_if = "Option::is_none"
            )]
            pub funding_max_per_day: Option<u128>,
            /// Overrides `defaults.paused`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub paused: Option<bool>,
            /// Overrides `defaults.pause_accepts_creates`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pause_accepts_creates: Option<bool>,
            /// Overrides rules of `defaults.policy` (each rule a key).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub policy: Option<PolicyOverride>,
        }

        impl $name {
            /// `defaults` with this entry's overrides applied.
        pub fn merged_settings(&self, defaults: &SubmitterSettings) -> SubmitterSettings {
            let d = defaults;
            let bump = self.gas_bump.unwrap_or_default();
            SubmitterSettings {
                max_in_flight: self.max_in_flight.unwrap_or(d.max_in_flight),
                batch_size: self.batch_size.unwrap_or(d.batch_size),
                ingress_capacity: self.ingress_capacity.unwrap_or(d.ingress_capacity),
                hold_slot_until_final: self
                    .hold_slot_until_final
                    .unwrap_or(d.hold_slot_until_final),
                protect_on_external_nonce: self
                    .protect_on_external_nonce
                    .unwrap_or(d.protect_on_external_nonce),
                finality: self.finality.unwrap_or(d.finality),
                resubmit_interval: self.resubmit_interval.unwrap_or(d.resubmit_interval),
                max_resubmits: self.max_resubmits.unwrap_or(d.max_resubmits),
                stuck_after: self.stuck_after.unwrap_or(d.stuck_after),
                cancel_when_stuck: self.cancel_when_stuck.unwrap_or(d.cancel_when_stuck),
                reject_after: self.reject_after.unwrap_or(d.reject_after),
                gas_limit_margin: self.gas_limit_margin.unwrap_or(d.gas_limit_margin),
                legacy_fees: self.legacy_fees.unwrap_or(d.legacy_fees),
                max_fee_per_gas_cap: self.max_fee_per_gas_cap.or(d.max_fee_per_gas_cap),
                max_priority_fee_per_gas_cap: self
                    .max_priority_fee_per_gas_cap
                    .or(d.max_priority_fee_per_gas_cap),
                gas_price_cap: self.gas_price_cap.or(d.gas_price_cap),
                gas_bump: GasBump {
                    enabled: bump.enabled.unwrap_or(d.gas_bump.enabled),
                    multiplier: bump.multiplier.unwrap_or(d.gas_bump.multiplier),
                },
                min_balance: self.min_balance.or(d.min_balance),
                top_up: self.top_up.or(d.top_up),
                funding_max_per_day: self.funding_max_per_day.or(d.funding_max_per_day),
                private_sends: self.private_sends.unwrap_or(d.private_sends),
                paused: self.paused.unwrap_or(d.paused),
                pause_accepts_creates: self
                    .pause_accepts_creates
                    .unwrap_or(d.pause_accepts_creates),
                policy: self
                    .policy
                    .as_ref()
                    .map_or_else(|| d.policy.clone(), |p| p.merged(&d.policy)),
                // Node-wide (derived from `chain.poll_interval`), never overridden.
                retry_backoff: d.retry_backoff,
            }
        }

            /// Whether any `[defaults]` knob is overridden here.
            pub fn has_overrides(&self) -> bool {
                self.max_in_flight.is_some() || self.batch_size.is_some() || self.ingress_capacity.is_some() || self.hold_slot_until_final.is_some() || self.protect_on_external_nonce.is_some() || self.finality.is_some() || self.resubmit_interval.is_some() || self.max_resubmits.is_some() || self.stuck_after.is_some() || self.cancel_when_stuck.is_some() || self.reject_after.is_some() || self.gas_limit_margin.is_some() || self.legacy_fees.is_some() || self.max_fee_per_gas_cap.is_some() || self.max_priority_fee_per_gas_cap.is_some() || self.gas_price_cap.is_some() || self.gas_bump.is_some() || self.min_balance.is_some() || self.top_up.is_some() || self.funding_max_per_day.is_some() || self.private_sends.is_some() || self.paused.is_some() || self.pause_accepts_creates.is_some() || self.policy.is_some()
            }

            /// These fields with every override unset.
            fn with_fields($($field: $ty),*) -> Self {
                Self {
                    $($field,)*
                    max_in_flight: None,
                    batch_size: None,
                    ingress_capacity: None,
                    hold_slot_until_final: None,
                    protect_on_external_nonce: None,
                    finality: None,
                    resubmit_interval: None,
                    max_resubmits: None,
                    stuck_after: None,
                    cancel_when_stuck: None,
                    reject_after: None,
                    gas_limit_margin: None,
                    legacy_fees: None,
                    max_fee_per_gas_cap: None,
                    max_priority_fee_per_gas_cap: None,
                    gas_price_cap: None,
                    gas_bump: None,
                    min_balance: None,
                    top_up: None,
                    funding_max_per_day: None,
                    private_sends: None,
                    paused: None,
                    pause_accepts_creates: None,
                    policy: None,
                }
            }
        }
    };
}

settings_overrides! {
    /// Overrides of `[defaults]` knobs without a signer: a chain's
    /// `[chains.X].defaults` and a submitter's `[submitters."0x…".on.X]`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SettingsOverrides {}
}

impl Default for SettingsOverrides {
    fn default() -> Self {
        Self::with_fields()
    }
}

settings_overrides! {
    /// One configured submitter as written in the file.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SubmitterConfig {
        /// Where the private key comes from (one key, one signer, whatever
        /// the chains).
        pub signer: SignerSpec,
        /// The chains (names of `[chains.X]`) it sends on; every configured
        /// chain when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub chains: Option<Vec<String>>,
        /// Per-chain overrides (`[submitters."0x…".on.X]`), applied last.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub on: BTreeMap<String, SettingsOverrides>,
    }
}

/// Partial override of `[defaults.gas_bump]`; unset fields inherit.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GasBumpOverride {
    /// Overrides `defaults.gas_bump.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Overrides `defaults.gas_bump.multiplier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
}

/// Partial override of `[defaults.policy]`: each rule set here replaces
/// the one below (a list replaces the list); unset rules inherit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyOverride {
    /// Overrides `policy.allowed_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_to: Option<Vec<Address>>,
    /// Overrides `policy.allowed_selectors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_selectors: Option<BTreeMap<Address, Vec<Selector>>>,
    /// Overrides `policy.deny_contract_creation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_contract_creation: Option<bool>,
    /// Overrides `policy.allow_contract_creation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_contract_creation: Option<bool>,
    /// Overrides `policy.max_value_per_tx`.
    #[serde(
        default,
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_value_per_tx: Option<u128>,
    /// Overrides `policy.spend_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend_limit: Option<SpendLimit>,
    /// Overrides `policy.spend_wait`.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub spend_wait: Option<Duration>,
    /// Overrides `policy.max_fee_per_tx`.
    #[serde(
        default,
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_fee_per_tx: Option<u128>,
}

impl PolicyOverride {
    /// `base` with the rules set here replaced.
    pub fn merged(&self, base: &Policy) -> Policy {
        Policy {
            allowed_to: self
                .allowed_to
                .as_ref()
                .map(|list| Arc::from(list.as_slice()))
                .or_else(|| base.allowed_to.clone()),
            allowed_selectors: self
                .allowed_selectors
                .as_ref()
                .map(|map| Arc::new(map.clone()))
                .or_else(|| base.allowed_selectors.clone()),
            deny_contract_creation: self
                .deny_contract_creation
                .unwrap_or(base.deny_contract_creation),
            allow_contract_creation: self
                .allow_contract_creation
                .unwrap_or(base.allow_contract_creation),
            max_value_per_tx: self.max_value_per_tx.or(base.max_value_per_tx),
            max_fee_per_tx: self.max_fee_per_tx.or(base.max_fee_per_tx),
            spend_limit: self.spend_limit.or(base.spend_limit),
            spend_wait: self.spend_wait.unwrap_or(base.spend_wait),
        }
    }
}

impl SubmitterConfig {
    /// A submitter with only a signer; every knob inherits the defaults and
    /// it sends on every configured chain.
    pub fn new(signer: SignerSpec) -> Self {
        Self::with_fields(signer, None, BTreeMap::new())
    }
}

/// A submitter ready to run: lower-case address, signer and the merged
/// settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSubmitter {
    /// Lower-case `0x` + 40 hex address, as stored in the database.
    pub address: String,
    /// The chain (its name) these settings are for.
    pub chain: String,
    /// Where the private key comes from.
    pub signer: SignerSpec,
    /// Defaults merged with this submitter's overrides: what the engine runs.
    pub settings: SubmitterSettings,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_and_gas_bump_merges_field_by_field() {
        let defaults = SubmitterSettings::default();
        let mut entry = SubmitterConfig::new(SignerSpec::env("K"));
        entry.max_in_flight = Some(1);
        entry.hold_slot_until_final = Some(true);
        entry.gas_bump = Some(GasBumpOverride {
            enabled: Some(true),
            multiplier: None,
        });
        let merged = entry.merged_settings(&defaults);
        assert!(merged.is_strict());
        assert!(merged.gas_bump.enabled);
        assert_eq!(merged.gas_bump.multiplier, defaults.gas_bump.multiplier);
        assert_eq!(merged.batch_size, defaults.batch_size);
    }
}
