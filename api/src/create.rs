//! `POST /v1/transactions`: the body a client sends and the answer it gets.
//!
//! The daemon validates the body (`src/http/intent_body.rs`); these types
//! only carry it, so a client builds exactly what the daemon reads.

use std::fmt;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::TxState;

/// The create body as sent. Unknown fields are refused so that a misspelt
/// optional field (`gasLimit`) is an error rather than silently ignored.
/// Absent optional fields are not written, so the daemon's defaults apply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "submitter": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "request_id": "order-42",
    "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "value": "1000000000000000"
}))]
pub struct CreateBody {
    /// The chain to send on (EIP-155 id); required when the deployment
    /// serves several chains.
    #[schema(minimum = 1)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<u64>,
    /// Signing address, `0x` hex; mixed case must be a valid EIP-55 checksum.
    #[schema(pattern = "^0x[0-9a-fA-F]{40}$")]
    pub submitter: String,
    /// Idempotency key, 1 to 256 characters without control characters;
    /// alternatively the `Idempotency-Key` header.
    #[schema(min_length = 1, max_length = 256)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Recipient; absent = contract creation.
    #[schema(pattern = "^0x[0-9a-fA-F]{40}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Wei to send, at most 2^256-1; absent = 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<WeiString>,
    /// Call data or init code, `0x` hex of even length, at most
    /// `http.data_limit_bytes` decoded; absent = empty.
    #[schema(pattern = "^0x([0-9a-fA-F]{2})*$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Fixed gas limit; absent = estimated by the engine.
    #[schema(minimum = 21000, maximum = 1000000000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gas_limit: Option<u64>,
    /// EIP-1559 max fee per gas in wei, at most 2^128-1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fee_per_gas: Option<WeiString>,
    /// EIP-1559 max priority fee per gas in wei, at most 2^128-1 and at
    /// most `max_fee_per_gas`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_priority_fee_per_gas: Option<WeiString>,
    /// Send only to the chain's send-only endpoints (a private mempool),
    /// never to the public ones; default false (or the submitter's
    /// `private_sends`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private: Option<bool>,
    /// Deadline, RFC 3339 (e.g. `2026-11-27T18:00:00Z`): after it, an
    /// intent without a nonce yet is REJECTED (`sub_state` `expired`, no
    /// nonce used) and one sent but not mined is cancelled. In the future,
    /// at most `http.max_valid_for` ahead.
    #[schema(format = DateTime)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<String>,
}

/// An amount of wei exactly as the client wrote it, decimal (`"1000"`) or
/// `0x` hex; only a JSON string deserialises into it, so numbers fail with a
/// message that says why (many clients turn large integers into floats).
///
/// ```
/// use txmgr_api::WeiString;
/// assert_eq!(WeiString::from(10u128.pow(15)).0, "1000000000000000");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[schema(value_type = String, pattern = "^([0-9]+|0[xX][0-9a-fA-F]+)$")]
pub struct WeiString(pub String);

impl From<u128> for WeiString {
    fn from(wei: u128) -> Self {
        WeiString(wei.to_string())
    }
}

impl From<&str> for WeiString {
    fn from(wei: &str) -> Self {
        WeiString(wei.to_owned())
    }
}

impl From<String> for WeiString {
    fn from(wei: String) -> Self {
        WeiString(wei)
    }
}

impl fmt::Display for WeiString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for WeiString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for WeiString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = WeiString;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a string of wei, decimal or 0x hex (JSON numbers are refused: \
                     they lose precision in many clients)",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<WeiString, E> {
                Ok(WeiString(v.to_owned()))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Answer to a create: 202 when new, 200 on a replay (the same request id
/// with the same content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatedBody {
    /// The chain it is sent on.
    pub chain_id: u64,
    /// The intent's id.
    pub tx_id: Uuid,
    /// Its state now (`QUEUED` when new).
    pub state: TxState,
    /// Lower-case `0x` hex, as everywhere in the API.
    #[schema(pattern = "^0x[0-9a-f]{40}$")]
    pub submitter: String,
    /// The idempotency key, if one was given.
    pub request_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_fields_are_not_sent_and_numbers_are_refused() {
        let body = CreateBody {
            submitter: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(),
            value: Some(1000u128.into()),
            ..CreateBody::default()
        };
        let json = serde_json::to_value(&body).expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({
                "submitter": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
                "value": "1000"
            })
        );
        let back: CreateBody = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, body);
        let number = serde_json::json!({"submitter": "0x00", "value": 1000});
        assert!(serde_json::from_value::<CreateBody>(number).is_err());
    }
}
