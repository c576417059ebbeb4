//! Gas and fee decisions for a new attempt (README "How an intent is executed").

use alloy::{
    consensus::{TxEip1559, TxLegacy, TypedTransaction},
    primitives::TxKind,
};

use super::{settings::MIN_BUMP_MULTIPLIER, SubmitterSettings};
use crate::{chain::FeeQuote, domain::Intent};

/// Fees chosen for one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fees {
    /// EIP-1559.
    Eip1559 {
        /// `max_fee_per_gas`.
        max_fee: u128,
        /// `max_priority_fee_per_gas`.
        priority: u128,
    },
    /// Legacy gas price.
    Legacy {
        /// `gas_price`.
        gas_price: u128,
    },
}

impl Fees {
    /// `(max_fee_per_gas, max_priority_fee_per_gas, gas_price)` as stored on
    /// an attempt: the EIP-1559 pair or the legacy price, never both.
    pub(crate) fn columns(self) -> (Option<u128>, Option<u128>, Option<u128>) {
        match self {
            Fees::Eip1559 { max_fee, priority } => (Some(max_fee), Some(priority), None),
            Fees::Legacy { gas_price } => (None, None, Some(gas_price)),
        }
    }
}

impl Fees {
    /// The most an attempt at these fees can cost: `gas_limit ×
    /// max_fee_per_gas` (legacy: `× gas_price`), wei.
    pub(crate) fn worst_case(self, gas_limit: u64) -> alloy::primitives::U256 {
        let per_gas = match self {
            Fees::Eip1559 { max_fee, .. } => max_fee,
            Fees::Legacy { gas_price } => gas_price,
        };
        alloy::primitives::U256::from(per_gas)
            .saturating_mul(alloy::primitives::U256::from(gas_limit))
    }
}

/// Gas limit: the intent's, or the estimate × margin.
pub(crate) fn gas_limit(intent: &Intent, estimate: Option<u64>, margin: f64) -> u64 {
    intent.gas_limit.unwrap_or_else(|| {
        let estimate = estimate.unwrap_or(21_000);
        // Float rounding is fine for a safety margin; never below the estimate.
        ((estimate as f64) * margin.max(1.0))
            .ceil()
            .max(estimate as f64) as u64
    })
}

/// Prices an attempt: the intent's own fees when given, else the market
/// (`max_fee = 2 × base_fee + priority`), always within the configured caps.
pub(crate) fn price(intent: &Intent, quote: &FeeQuote, settings: &SubmitterSettings) -> Fees {
    let cap = |value: u128, cap: Option<u128>| cap.map_or(value, |c| value.min(c));
    if settings.legacy_fees {
        return Fees::Legacy {
            gas_price: cap(
                intent.max_fee_per_gas.unwrap_or(quote.gas_price),
                settings.gas_price_cap,
            ),
        };
    }
    let priority = cap(
        intent
            .max_priority_fee_per_gas
            .unwrap_or(quote.priority_fee),
        settings.max_priority_fee_per_gas_cap,
    );
    let max_fee = cap(
        intent
            .max_fee_per_gas
            .unwrap_or_else(|| quote.base_fee.saturating_mul(2).saturating_add(priority)),
        settings.max_fee_per_gas_cap,
    );
    Fees::Eip1559 {
        max_fee,
        priority: priority.min(max_fee),
    }
}

/// The market price now, uncapped: `max_fee = 2 × base_fee + priority`.
pub(crate) fn market(quote: &FeeQuote, legacy: bool) -> Fees {
    if legacy {
        return Fees::Legacy {
            gas_price: quote.gas_price,
        };
    }
    Fees::Eip1559 {
        max_fee: quote
            .base_fee
            .saturating_mul(2)
            .saturating_add(quote.priority_fee),
        priority: quote.priority_fee,
    }
}

/// `value × factor`, rounded up, in integer arithmetic (factor to 1/1000).
fn raise(value: u128, factor: f64) -> u128 {
    // Rounded to the nearest thousandth (1.1 × 1000 is 1100.000…01 in floating
    // point), never below the 10% nodes demand.
    let milli = (factor.max(MIN_BUMP_MULTIPLIER) * 1000.0).round() as u128;
    value.saturating_mul(milli).div_ceil(1000)
}

/// Fees of a replacement attempt (README "Resubmission, fee bumps, STUCK and cancel"): every fee field at
/// least `max(multiplier, 1.10)` × the previous attempt's, at least the
/// market price, never above the caps. `None` when the caps leave no room for
/// the minimum raise: the node would refuse the replacement, so the caller
/// re-broadcasts instead.
pub(crate) fn bump(
    previous: Fees,
    market: Fees,
    multiplier: f64,
    settings: &SubmitterSettings,
) -> Option<Fees> {
    let factor = multiplier.max(MIN_BUMP_MULTIPLIER);
    let cap = |value: u128, cap: Option<u128>| cap.map_or(value, |c| value.min(c));
    // A reload may have switched pricing: compare in the current shape.
    let (prev_max, prev_priority) = match previous {
        Fees::Eip1559 { max_fee, priority } => (max_fee, priority),
        Fees::Legacy { gas_price } => (gas_price, gas_price),
    };
    if settings.legacy_fees {
        let floor = raise(prev_max, factor);
        let market = match market {
            Fees::Legacy { gas_price } => gas_price,
            Fees::Eip1559 { max_fee, .. } => max_fee,
        };
        let gas_price = cap(floor.max(market), settings.gas_price_cap);
        return (gas_price >= floor).then_some(Fees::Legacy { gas_price });
    }
    let (market_max, market_priority) = match market {
        Fees::Eip1559 { max_fee, priority } => (max_fee, priority),
        Fees::Legacy { gas_price } => (gas_price, gas_price),
    };
    let floor_max = raise(prev_max, factor);
    let floor_priority = raise(prev_priority, factor);
    let max_fee = cap(floor_max.max(market_max), settings.max_fee_per_gas_cap);
    let priority = cap(
        floor_priority.max(market_priority),
        settings.max_priority_fee_per_gas_cap,
    )
    .min(max_fee);
    (max_fee >= floor_max && priority >= floor_priority)
        .then_some(Fees::Eip1559 { max_fee, priority })
}

/// The fees an attempt was signed with.
pub(crate) fn of_attempt(fees: &crate::store::resubmit_claims::AttemptFees) -> Fees {
    match (fees.gas_price, fees.max_fee_per_gas) {
        (Some(gas_price), _) => Fees::Legacy { gas_price },
        (None, max_fee) => Fees::Eip1559 {
            max_fee: max_fee.unwrap_or(0),
            priority: fees.max_priority_fee_per_gas.unwrap_or(0),
        },
    }
}

/// The unsigned transaction for an intent at a nonce.
pub(crate) fn build(
    intent: &Intent,
    chain_id: u64,
    nonce: u64,
    gas_limit: u64,
    fees: Fees,
) -> TypedTransaction {
    let to = intent.to.map_or(TxKind::Create, TxKind::Call);
    match fees {
        Fees::Eip1559 { max_fee, priority } => TypedTransaction::Eip1559(TxEip1559 {
            chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: priority,
            to,
            value: intent.value,
            access_list: Default::default(),
            input: intent.data.clone(),
        }),
        Fees::Legacy { gas_price } => TypedTransaction::Legacy(TxLegacy {
            chain_id: Some(chain_id),
            nonce,
            gas_price,
            gas_limit,
            to,
            value: intent.value,
            input: intent.data.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::{Address, U256};

    fn intent() -> Intent {
        Intent {
            to: None,
            ..Intent::transfer(Address::ZERO, U256::ZERO)
        }
    }

    const QUOTE: FeeQuote = FeeQuote {
        base_fee: 10,
        priority_fee: 2,
        gas_price: 15,
    };

    #[test]
    fn market_price_is_twice_base_plus_priority_within_caps() {
        let settings = SubmitterSettings::default();
        assert_eq!(
            price(&intent(), &QUOTE, &settings),
            Fees::Eip1559 {
                max_fee: 22,
                priority: 2
            }
        );
        let capped = SubmitterSettings {
            max_fee_per_gas_cap: Some(5),
            ..SubmitterSettings::default()
        };
        assert_eq!(
            price(&intent(), &QUOTE, &capped),
            Fees::Eip1559 {
                max_fee: 5,
                priority: 2
            }
        );
        let legacy = SubmitterSettings {
            legacy_fees: true,
            gas_price_cap: Some(12),
            ..SubmitterSettings::default()
        };
        assert_eq!(
            price(&intent(), &QUOTE, &legacy),
            Fees::Legacy { gas_price: 12 }
        );
    }

    #[test]
    fn a_bump_raises_both_fields_by_at_least_ten_percent_and_follows_the_market() {
        let settings = SubmitterSettings::default();
        let previous = Fees::Eip1559 {
            max_fee: 100,
            priority: 10,
        };
        let cheap_market = Fees::Eip1559 {
            max_fee: 50,
            priority: 1,
        };
        // A multiplier below 1.10 is raised to 1.10; rounding goes up.
        assert_eq!(
            bump(previous, cheap_market, 1.05, &settings),
            Some(Fees::Eip1559 {
                max_fee: 110,
                priority: 11
            })
        );
        let spiked = Fees::Eip1559 {
            max_fee: 400,
            priority: 30,
        };
        assert_eq!(
            bump(previous, spiked, 1.125, &settings),
            Some(Fees::Eip1559 {
                max_fee: 400,
                priority: 30
            })
        );
    }

    #[test]
    fn a_bump_never_exceeds_the_cap_and_gives_up_when_the_cap_leaves_no_room() {
        let previous = Fees::Eip1559 {
            max_fee: 100,
            priority: 10,
        };
        let spiked = Fees::Eip1559 {
            max_fee: 400,
            priority: 30,
        };
        let capped = SubmitterSettings {
            max_fee_per_gas_cap: Some(150),
            ..SubmitterSettings::default()
        };
        assert_eq!(
            bump(previous, spiked, 1.125, &capped),
            Some(Fees::Eip1559 {
                max_fee: 150,
                priority: 30
            })
        );
        let tight = SubmitterSettings {
            max_fee_per_gas_cap: Some(105),
            ..SubmitterSettings::default()
        };
        assert_eq!(bump(previous, spiked, 1.125, &tight), None);
        let legacy = SubmitterSettings {
            legacy_fees: true,
            gas_price_cap: Some(1_000),
            ..SubmitterSettings::default()
        };
        assert_eq!(
            bump(
                Fees::Legacy { gas_price: 100 },
                Fees::Legacy { gas_price: 20 },
                1.2,
                &legacy
            ),
            Some(Fees::Legacy { gas_price: 120 })
        );
        assert_eq!(
            bump(
                Fees::Legacy { gas_price: 950 },
                Fees::Legacy { gas_price: 20 },
                1.2,
                &legacy
            ),
            None
        );
    }

    #[test]
    fn gas_limit_prefers_the_intent_then_the_estimate_with_margin() {
        let mut fixed = intent();
        fixed.gas_limit = Some(50_000);
        assert_eq!(gas_limit(&fixed, Some(21_000), 1.2), 50_000);
        assert_eq!(gas_limit(&intent(), Some(21_000), 1.2), 25_200);
        assert_eq!(gas_limit(&intent(), Some(21_000), 0.5), 21_000);
    }
}
