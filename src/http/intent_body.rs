//! The `POST /v1/transactions` body and its validation into an [`Intent`].
//!
//! Decisions, all answered with 400 `invalid_request` and the field:
//! - Addresses are `0x` + 40 hex digits; mixed case must be a valid EIP-55
//!   checksum (a wrong checksum is a typo, not a different address).
//! - `value` and the fee fields are **strings** of wei, decimal (`"1000"`) or
//!   `0x` hex (`"0x3e8"`). JSON numbers are refused: many clients turn large
//!   integers into floats and would silently send a different amount. Values
//!   above 2^256-1 (fees: 2^128-1), signs, blanks and fractions are refused.
//! - `data` is `0x` hex of even length, at most `http.data_limit_bytes`
//!   decoded bytes; absent = empty. Without `to` (contract creation) it must
//!   not be empty.
//! - `gas_limit` is a JSON integer in `21000..=1_000_000_000`: below 21000 no
//!   transaction is valid; the upper bound only catches typos (e.g. wei sent as
//!   gas) — each chain's own cap is enforced when the engine prepares the
//!   transaction.
//! - `max_priority_fee_per_gas` may not exceed `max_fee_per_gas`.
//! - `request_id` (or the `Idempotency-Key` header; both must agree) is 1..=256
//!   characters without control characters.

use alloy::primitives::{Address, Bytes, U256};
use txmgr_actors::domain::Intent;

use super::{error::ApiError, text::validate_request_id};

/// Smallest gas limit any transaction can have (intrinsic cost of a transfer).
pub const MIN_GAS_LIMIT: u64 = 21_000;
/// Largest gas limit accepted at the edge: a typo guard, not a chain rule.
pub const MAX_GAS_LIMIT: u64 = 1_000_000_000;
/// Longest `request_id`, in characters (the schema's CHECK agrees).
pub const MAX_REQUEST_ID_CHARS: usize = 256;

/// The body and the amounts as the API crate defines them.
pub use txmgr_api::{CreateBody, WeiString};

/// A create that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidCreate {
    /// The chain the body names, if any (the caller resolves it).
    pub chain_id: Option<u64>,
    /// Whose transaction it is.
    pub submitter: Address,
    /// The idempotency key, from the body or the header.
    pub request_id: Option<String>,
    /// What to send.
    pub intent: Intent,
}

/// Checks every field of a create body.
pub(crate) trait ValidateCreate {
    /// Validates every field; `idempotency_key` is the header's value, if any.
    fn validate(
        self,
        idempotency_key: Option<&str>,
        data_limit_bytes: usize,
        max_valid_for: std::time::Duration,
    ) -> Result<ValidCreate, ApiError>;
}

impl ValidateCreate for CreateBody {
    fn validate(
        self,
        idempotency_key: Option<&str>,
        data_limit_bytes: usize,
        max_valid_for: std::time::Duration,
    ) -> Result<ValidCreate, ApiError> {
        let submitter = parse_address("submitter", &self.submitter)?;
        let request_id = match (self.request_id, idempotency_key) {
            (Some(body), Some(header)) if body != header => {
                return Err(ApiError::invalid(
                    "request_id",
                    "request_id and the Idempotency-Key header differ",
                ))
            }
            (Some(id), _) => Some(id),
            (None, header) => header.map(str::to_owned),
        };
        if let Some(id) = &request_id {
            validate_request_id(id)?;
            if let Some(prefix) = txmgr_actors::domain::engine_request_id_prefix(id) {
                return Err(ApiError::invalid(
                    "request_id",
                    format!(
                        "the prefix {prefix:?} is reserved for the intents txmgr makes itself (fillers, top-ups)"
                    ),
                ));
            }
        }
        let to = self
            .to
            .as_deref()
            .map(|to| parse_address("to", to))
            .transpose()?;
        let value = match &self.value {
            Some(value) => parse_wei("value", &value.0)?,
            None => U256::ZERO,
        };
        let data = match &self.data {
            Some(data) => parse_data(data, data_limit_bytes)?,
            None => Bytes::new(),
        };
        if to.is_none() && data.is_empty() {
            return Err(ApiError::invalid(
                "data",
                "a contract creation (no `to`) needs init code in data",
            ));
        }
        if let Some(gas) = self.gas_limit {
            if !(MIN_GAS_LIMIT..=MAX_GAS_LIMIT).contains(&gas) {
                return Err(ApiError::invalid(
                    "gas_limit",
                    format!("gas_limit must be between {MIN_GAS_LIMIT} and {MAX_GAS_LIMIT}"),
                ));
            }
        }
        let max_fee = parse_fee("max_fee_per_gas", self.max_fee_per_gas.as_ref())?;
        let priority = parse_fee(
            "max_priority_fee_per_gas",
            self.max_priority_fee_per_gas.as_ref(),
        )?;
        if let (Some(max_fee), Some(priority)) = (max_fee, priority) {
            if priority > max_fee {
                return Err(ApiError::invalid(
                    "max_priority_fee_per_gas",
                    "max_priority_fee_per_gas exceeds max_fee_per_gas",
                ));
            }
        }
        let valid_until = self
            .valid_until
            .as_deref()
            .map(|until| parse_deadline(until, max_valid_for))
            .transpose()?;
        Ok(ValidCreate {
            chain_id: self.chain_id,
            submitter,
            request_id,
            intent: Intent {
                to,
                value,
                data,
                gas_limit: self.gas_limit,
                max_fee_per_gas: max_fee,
                max_priority_fee_per_gas: priority,
                private: self.private.unwrap_or(false),
                valid_until,
            },
        })
    }
}

/// `valid_until`: RFC 3339, in the future, at most `max_valid_for` ahead.
fn parse_deadline(
    until: &str,
    max_valid_for: std::time::Duration,
) -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
    let parsed = chrono::DateTime::parse_from_rfc3339(until)
        .map_err(|e| {
            ApiError::invalid(
                "valid_until",
                format!("valid_until must be an RFC 3339 time such as 2026-11-27T18:00:00Z: {e}"),
            )
        })?
        .with_timezone(&chrono::Utc);
    let now = chrono::Utc::now();
    if parsed <= now {
        return Err(ApiError::invalid(
            "valid_until",
            "valid_until is in the past",
        ));
    }
    let furthest = chrono::Duration::from_std(max_valid_for)
        .ok()
        .and_then(|ahead| now.checked_add_signed(ahead));
    if furthest.is_some_and(|furthest| parsed > furthest) {
        return Err(ApiError::invalid(
            "valid_until",
            format!(
                "valid_until is more than http.max_valid_for ({}) ahead",
                humantime::format_duration(max_valid_for)
            ),
        ));
    }
    Ok(parsed)
}

/// `0x` + 40 hex digits; mixed case must carry a valid EIP-55 checksum.
pub(crate) fn parse_address(field: &str, s: &str) -> Result<Address, ApiError> {
    let hex = s.strip_prefix("0x").ok_or_else(|| {
        ApiError::invalid(field, format!("{field} must be a 0x-prefixed hex address"))
    })?;
    if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::invalid(
            field,
            format!("{field} must be 0x followed by 40 hex digits"),
        ));
    }
    let mixed_case =
        hex.bytes().any(|b| b.is_ascii_lowercase()) && hex.bytes().any(|b| b.is_ascii_uppercase());
    let parsed = if mixed_case {
        Address::parse_checksummed(s, None).map_err(|_| {
            ApiError::invalid(
                field,
                format!("{field} has mixed case but is not a valid EIP-55 checksum"),
            )
        })
    } else {
        s.parse::<Address>()
            .map_err(|e| ApiError::invalid(field, format!("{field} is not an address: {e}")))
    };
    parsed
}

/// A non-negative integer of wei, decimal or `0x` hex, at most 2^256-1.
pub(crate) fn parse_wei(field: &str, s: &str) -> Result<U256, ApiError> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    let well_formed = !digits.is_empty()
        && digits.bytes().all(|b| match radix {
            16 => b.is_ascii_hexdigit(),
            _ => b.is_ascii_digit(),
        });
    if !well_formed {
        return Err(ApiError::invalid(
            field,
            format!("{field} must be a non-negative integer of wei, decimal or 0x hex"),
        ));
    }
    U256::from_str_radix(digits, radix)
        .map_err(|_| ApiError::invalid(field, format!("{field} exceeds 2^256-1")))
}

/// A fee per gas: like [`parse_wei`] but at most 2^128-1.
fn parse_fee(field: &str, s: Option<&WeiString>) -> Result<Option<u128>, ApiError> {
    s.map(|s| {
        let wei = parse_wei(field, &s.0)?;
        u128::try_from(wei)
            .map_err(|_| ApiError::invalid(field, format!("{field} exceeds 2^128-1")))
    })
    .transpose()
}

/// `0x` hex of even length within the data limit.
fn parse_data(s: &str, limit: usize) -> Result<Bytes, ApiError> {
    let hex = s
        .strip_prefix("0x")
        .ok_or_else(|| ApiError::invalid("data", "data must be 0x-prefixed hex"))?;
    if hex.len() % 2 != 0 {
        return Err(ApiError::invalid(
            "data",
            "data must have an even number of hex digits",
        ));
    }
    // Checked before decoding so an oversized string costs no allocation.
    if hex.len() / 2 > limit {
        return Err(ApiError::invalid(
            "data",
            format!("data exceeds the limit of {limit} bytes"),
        ));
    }
    alloy::hex::decode(hex)
        .map(Bytes::from)
        .map_err(|_| ApiError::invalid("data", "data is not valid hex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(result: Result<impl std::fmt::Debug, ApiError>) -> Option<String> {
        match result {
            Err(ApiError::InvalidRequest { field, .. }) => field,
            other => panic!("expected invalid_request, got {other:?}"),
        }
    }

    #[test]
    fn wei_accepts_decimal_and_hex_only() {
        assert_eq!(parse_wei("value", "1000").ok(), Some(U256::from(1000u64)));
        assert_eq!(parse_wei("value", "0x3e8").ok(), Some(U256::from(1000u64)));
        assert_eq!(parse_wei("value", "0").ok(), Some(U256::ZERO));
        let max = U256::MAX.to_string();
        assert_eq!(parse_wei("value", &max).ok(), Some(U256::MAX));
        let over = format!("{max}0");
        for bad in [
            "",
            "0x",
            "-1",
            "+1",
            "1.5",
            "1e18",
            " 1",
            "0xg",
            over.as_str(),
        ] {
            assert_eq!(
                field(parse_wei("value", bad)).as_deref(),
                Some("value"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn addresses_check_mixed_case_checksums() {
        let lower = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
        let checksummed = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        assert!(parse_address("to", lower).is_ok());
        assert!(parse_address("to", checksummed).is_ok());
        assert!(parse_address("to", &lower.to_uppercase().replacen("0X", "0x", 1)).is_ok());
        let bad_checksum = "0xF39fd6e51aad88F6F4ce6aB8827279cffFb92266";
        for bad in [
            bad_checksum,
            "f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "0x1234",
        ] {
            assert_eq!(
                field(parse_address("to", bad)).as_deref(),
                Some("to"),
                "{bad}"
            );
        }
    }

    #[test]
    fn data_is_even_hex_within_limit() {
        assert_eq!(parse_data("0x", 4).ok(), Some(Bytes::new()));
        assert_eq!(parse_data("0xdeadbeef", 4).ok().map(|b| b.len()), Some(4));
        for bad in ["0xdeadbeef00", "0xabc", "deadbeef", "0xzz"] {
            assert_eq!(field(parse_data(bad, 4)).as_deref(), Some("data"), "{bad}");
        }
    }
}
