//! `policy`: what a submitter may be asked to send (README "Guardrails").
//! The rules decided by the request alone — destination, selector,
//! contract creation, value — are checked when an intent is created, before
//! anything is stored; a create they refuse is a 403 `policy_violation`
//! naming the field and the rule. The leader checks them again before it
//! draws nonces (`submitter::cycle`), with the same function.
//!
//! A contract creation has no destination, and its init code runs with the
//! intent's `value` and may call or pay anything (a constructor that
//! self-destructs to an address moves the value there). So a policy that
//! lists destinations (`allowed_to` or `allowed_selectors`) refuses
//! creations unless `allow_contract_creation` says otherwise: otherwise
//! every destination rule could be stepped around by a creation.

use std::{collections::BTreeMap, sync::Arc};

use alloy::primitives::{Address, FixedBytes, U256};
use serde::{Deserialize, Serialize};

use super::file_format;
use crate::domain::Intent;
pub use crate::domain::PolicyViolation;

/// The 4-byte function selector at the start of a call's `data`.
pub type Selector = FixedBytes<4>;

/// A submitter's policy; every rule optional (unset = not restricted).
/// Cheap to clone: the lists are shared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// The destinations (`to`) allowed; unset = any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_to: Option<Arc<[Address]>>,
    /// Per destination, the selectors its `data` may start with; a
    /// destination not listed takes any `data`, one listed takes only calls
    /// with one of its selectors (a call without data is refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_selectors: Option<Arc<BTreeMap<Address, Vec<Selector>>>>,
    /// Refuse intents without `to` (contract creation), whatever else the
    /// policy says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deny_contract_creation: bool,
    /// Accept contract creations although `allowed_to` or
    /// `allowed_selectors` is set (they refuse them otherwise: init code
    /// can send the value and call anything, past those lists). Without
    /// either list creations are accepted anyway (unless
    /// `deny_contract_creation`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_contract_creation: bool,
    /// The most `value` (wei) one intent may send.
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_value_per_tx: Option<u128>,
    /// The most one attempt may cost at worst, `gas_limit × max_fee_per_gas`
    /// (legacy: `× gas_price`), wei: checked at create when the request fixes
    /// both, and applied when signing and bumping by lowering the per-gas
    /// caps to `max_fee_per_tx / gas_limit`.
    #[serde(
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_fee_per_tx: Option<u128>,
    /// The most `value` sent per rolling `window`, over every intent of the
    /// submitter on the chain, enforced by the leader when it draws nonces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend_limit: Option<SpendLimit>,
    /// How long an intent may wait QUEUED for room under `spend_limit`
    /// before it is REJECTED (`spend_limit`); default 1 h.
    #[serde(
        default = "default_spend_wait",
        with = "humantime_serde",
        skip_serializing_if = "is_default_spend_wait"
    )]
    pub spend_wait: std::time::Duration,
}

/// `spend_limit = { value, fees, window }`: at most `value` wei sent and
/// at most `fees` wei of fees paid per rolling `window` (either may be
/// absent, not both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendLimit {
    /// Wei of `value` per window.
    #[serde(
        default,
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub value: Option<u128>,
    /// Wei of fees per window: each intent's worst case
    /// (`gas_limit × max_fee_per_gas` of its dearest attempt) until its
    /// receipt, then what it paid (`gas_used × effective_gas_price`, plus an
    /// L2's `l1Fee`).
    #[serde(
        default,
        with = "file_format::wei_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub fees: Option<u128>,
    /// The rolling window.
    #[serde(with = "humantime_serde")]
    pub window: std::time::Duration,
}

/// Longest `spend_limit.window` accepted (100 years): the ledger's window
/// arithmetic (`now() - window`) would overflow the database's timestamps.
pub(super) const MAX_SPEND_WINDOW: std::time::Duration =
    std::time::Duration::from_secs(100 * 365 * 24 * 3600);

/// Default `spend_wait`.
pub const DEFAULT_SPEND_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

fn default_spend_wait() -> std::time::Duration {
    DEFAULT_SPEND_WAIT
}

fn is_default_spend_wait(wait: &std::time::Duration) -> bool {
    *wait == DEFAULT_SPEND_WAIT
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            allowed_to: None,
            allowed_selectors: None,
            deny_contract_creation: false,
            allow_contract_creation: false,
            max_value_per_tx: None,
            max_fee_per_tx: None,
            spend_limit: None,
            spend_wait: DEFAULT_SPEND_WAIT,
        }
    }
}

impl Policy {
    /// No rule set.
    pub fn is_unrestricted(&self) -> bool {
        *self == Policy::default()
    }

    /// Whether `intent` may be created: every rule the request decides.
    pub fn check(&self, intent: &Intent) -> Result<(), PolicyViolation> {
        let Some(to) = intent.to else {
            if self.deny_contract_creation {
                return Err(PolicyViolation {
                    rule: "deny_contract_creation",
                    field: "to",
                    detail: "contract creation (no `to`) is not allowed for this submitter".into(),
                });
            }
            if let Some(rule) = self
                .destination_rule()
                .filter(|_| !self.allow_contract_creation)
            {
                return Err(PolicyViolation {
                    rule,
                    field: "to",
                    detail: format!(
                        "contract creation (no `to`) is refused: this submitter's {rule} lists \
                         its destinations and policy.allow_contract_creation is not set"
                    ),
                });
            }
            self.check_fee(intent)?;
            return self.check_value(intent.value);
        };
        if let Some(allowed) = &self.allowed_to {
            if !allowed.contains(&to) {
                return Err(PolicyViolation {
                    rule: "allowed_to",
                    field: "to",
                    detail: format!("{to:#x} is not an allowed destination of this submitter"),
                });
            }
        }
        self.check_fee(intent)?;
        if let Some(selectors) = self.allowed_selectors.as_ref().and_then(|m| m.get(&to)) {
            let selector = intent.data.get(..4).map(Selector::from_slice);
            if !selector.is_some_and(|s| selectors.contains(&s)) {
                let called = selector.map_or_else(|| "no selector".to_owned(), |s| s.to_string());
                return Err(PolicyViolation {
                    rule: "allowed_selectors",
                    field: "data",
                    detail: format!(
                        "{called} is not an allowed call of {to:#x} for this submitter"
                    ),
                });
            }
        }
        self.check_value(intent.value)
    }

    /// The rule that lists this policy's destinations (`allowed_to` first),
    /// if any: a creation would step around it.
    pub fn destination_rule(&self) -> Option<&'static str> {
        if self.allowed_to.is_some() {
            Some("allowed_to")
        } else if self.allowed_selectors.is_some() {
            Some("allowed_selectors")
        } else {
            None
        }
    }

    /// `max_fee_per_tx` against a request that fixes both its gas limit
    /// and its fee per gas (otherwise the signing applies it).
    fn check_fee(&self, intent: &Intent) -> Result<(), PolicyViolation> {
        let (Some(max), Some(gas), Some(fee)) = (
            self.max_fee_per_tx,
            intent.gas_limit,
            intent.max_fee_per_gas,
        ) else {
            return Ok(());
        };
        let worst = u128::from(gas).saturating_mul(fee);
        if worst > max {
            return Err(PolicyViolation {
                rule: "max_fee_per_tx",
                field: "max_fee_per_gas",
                detail: format!(
                    "gas_limit {gas} × max_fee_per_gas {fee} = {worst} wei is above this submitter's max_fee_per_tx {max}"
                ),
            });
        }
        Ok(())
    }

    /// The highest fee per gas an attempt of `gas_limit` may pay under
    /// `max_fee_per_tx` (`None`: no such rule).
    pub fn fee_per_gas_cap(&self, gas_limit: u64) -> Option<u128> {
        self.max_fee_per_tx
            .map(|max| max / u128::from(gas_limit.max(1)))
    }

    fn check_value(&self, value: U256) -> Result<(), PolicyViolation> {
        match self.max_value_per_tx {
            Some(max) if value > U256::from(max) => Err(PolicyViolation {
                rule: "max_value_per_tx",
                field: "value",
                detail: format!("{value} wei is above this submitter's max_value_per_tx {max}"),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{address, Bytes};

    use super::*;

    const TOKEN: Address = address!("1111111111111111111111111111111111111111");
    const PAYEE: Address = address!("2222222222222222222222222222222222222222");

    fn intent(to: Option<Address>, value: u64, data: &[u8]) -> Intent {
        Intent {
            to,
            value: U256::from(value),
            data: Bytes::copy_from_slice(data),
            gas_limit: None,
            max_fee_per_gas: None,
            max_priority_fee_per_gas: None,
            private: false,
            valid_until: None,
        }
    }

    fn policy() -> Policy {
        serde_json::from_value(serde_json::json!({
            "allowed_to": [TOKEN, PAYEE],
            "allowed_selectors": { TOKEN.to_string(): ["0xa9059cbb"] },
            "deny_contract_creation": true,
            "max_value_per_tx": "1000",
            "max_fee_per_tx": "2100000",
        }))
        .expect("policy")
    }

    fn rule(policy: &Policy, intent: &Intent) -> Option<(&'static str, &'static str)> {
        policy.check(intent).err().map(|v| (v.rule, v.field))
    }

    #[test]
    fn each_rule_refuses_what_it_names_and_passes_the_rest() {
        let p = policy();
        let transfer = [0xa9, 0x05, 0x9c, 0xbb, 0, 1];
        assert_eq!(rule(&p, &intent(Some(TOKEN), 0, &transfer)), None);
        assert_eq!(rule(&p, &intent(Some(PAYEE), 1000, &[])), None);
        assert_eq!(
            rule(&p, &intent(Some(Address::ZERO), 0, &[])),
            Some(("allowed_to", "to"))
        );
        assert_eq!(
            rule(&p, &intent(Some(TOKEN), 0, &[0x09, 0x5e, 0xa7, 0xb3])),
            Some(("allowed_selectors", "data"))
        );
        assert_eq!(
            rule(&p, &intent(Some(TOKEN), 0, &[0xa9, 0x05])),
            Some(("allowed_selectors", "data")),
            "a call shorter than a selector"
        );
        assert_eq!(
            rule(&p, &intent(Some(PAYEE), 1001, &[])),
            Some(("max_value_per_tx", "value"))
        );
        assert_eq!(
            rule(&p, &intent(None, 0, &[0x60])),
            Some(("deny_contract_creation", "to"))
        );
        let mut priced = intent(Some(PAYEE), 1, &[]);
        priced.gas_limit = Some(21_000);
        priced.max_fee_per_gas = Some(100);
        assert_eq!(rule(&p, &priced), None, "21000 × 100 = the cap");
        priced.max_fee_per_gas = Some(101);
        assert_eq!(
            rule(&p, &priced),
            Some(("max_fee_per_tx", "max_fee_per_gas"))
        );
        assert_eq!(p.fee_per_gas_cap(21_000), Some(100));
        assert_eq!(rule(&Policy::default(), &intent(None, u64::MAX, &[])), None);
        assert!(p.issues().is_empty());
    }

    #[test]
    fn a_policy_listing_destinations_refuses_creations_unless_allowed() {
        // PUSH20 <payee>; SELFDESTRUCT: the value goes to the payee.
        let mut init = vec![0x73];
        init.extend_from_slice(PAYEE.as_slice());
        init.push(0xff);
        let create = intent(None, 1000, &init);
        let listed =
            |rules: serde_json::Value| -> Policy { serde_json::from_value(rules).expect("policy") };
        let allowed_to = listed(serde_json::json!({ "allowed_to": [TOKEN] }));
        assert_eq!(rule(&allowed_to, &create), Some(("allowed_to", "to")));
        let selectors = listed(serde_json::json!({
            "allowed_selectors": { TOKEN.to_string(): ["0xa9059cbb"] },
        }));
        assert_eq!(rule(&selectors, &create), Some(("allowed_selectors", "to")));
        let opted_in = listed(serde_json::json!({
            "allowed_to": [TOKEN], "allow_contract_creation": true, "max_value_per_tx": "999",
        }));
        assert_eq!(
            rule(&opted_in, &intent(None, 999, &init)),
            None,
            "explicitly allowed"
        );
        assert_eq!(
            rule(&opted_in, &create),
            Some(("max_value_per_tx", "value")),
            "the other rules still hold"
        );
        let value_only = listed(serde_json::json!({ "max_value_per_tx": "1000" }));
        assert_eq!(
            rule(&value_only, &create),
            None,
            "no list: nothing to step around"
        );
    }
}
