//! Gas and fee decisions for a new attempt (DESIGN.md section 8).

use alloy::{
    consensus::{TxEip1559, TxLegacy, TypedTransaction},
    primitives::TxKind,
};

use super::SubmitterSettings;
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
    use alloy::primitives::{Bytes, U256};

    fn intent() -> Intent {
        Intent {
            to: None,
            value: U256::ZERO,
            data: Bytes::new(),
            gas_limit: None,
            max_fee_per_gas: None,
            max_priority_fee_per_gas: None,
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
    fn gas_limit_prefers_the_intent_then_the_estimate_with_margin() {
        let mut fixed = intent();
        fixed.gas_limit = Some(50_000);
        assert_eq!(gas_limit(&fixed, Some(21_000), 1.2), 50_000);
        assert_eq!(gas_limit(&intent(), Some(21_000), 1.2), 25_200);
        assert_eq!(gas_limit(&intent(), Some(21_000), 0.5), 21_000);
    }
}
