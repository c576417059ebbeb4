//! How [`SubmitterSettings`](super::SubmitterSettings) is written in
//! `config.toml`: the words of the yes/no knobs and the wei amount syntax.
//! Each module here is a serde `with` adapter, so the engine's field keeps
//! its type and the file keeps its documented spelling. The `option`
//! adapters serve the per-submitter overrides, where a missing key inherits.

use std::fmt;

use serde::de::{self, Visitor};

/// The word of `flag`: `words[0]` for false, `words[1]` for true.
fn word_of(flag: bool, words: &'static [&'static str; 2]) -> &'static str {
    words[usize::from(flag)]
}

/// The flag a word stands for; any other word is an error listing both.
fn flag_of<E: de::Error>(word: &str, words: &'static [&'static str; 2]) -> Result<bool, E> {
    match words.iter().position(|w| *w == word) {
        Some(index) => Ok(index == 1),
        None => Err(E::unknown_variant(word, words)),
    }
}

/// Defines the `with` adapter of a yes/no knob written as one of two words.
macro_rules! flag_words {
    ($(#[$doc:meta])* $key:ident: false = $off:literal, true = $on:literal) => {
        $(#[$doc])*
        pub mod $key {
            use serde::{Deserialize, Deserializer, Serializer};

            const WORDS: &[&str; 2] = &[$off, $on];

            /// Writes the flag as its word.
            pub fn serialize<S: Serializer>(flag: &bool, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(super::word_of(*flag, WORDS))
            }

            /// Reads the word.
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
                super::flag_of(&String::deserialize(d)?, WORDS)
            }

            /// The same for an optional override.
            pub mod option {
                use serde::{Deserialize, Deserializer, Serializer};

                /// Writes the flag as its word; `None` as nothing.
                pub fn serialize<S: Serializer>(
                    flag: &Option<bool>,
                    s: S,
                ) -> Result<S::Ok, S::Error> {
                    match flag {
                        Some(flag) => s.serialize_str(super::super::word_of(*flag, super::WORDS)),
                        None => s.serialize_none(),
                    }
                }

                /// Reads the word, if given.
                pub fn deserialize<'de, D: Deserializer<'de>>(
                    d: D,
                ) -> Result<Option<bool>, D::Error> {
                    Option::<String>::deserialize(d)?
                        .map(|word| super::super::flag_of(&word, super::WORDS))
                        .transpose()
                }
            }
        }
    };
}

flag_words!(
    /// `advance_after`: `"mined"` (pipelined) or `"confirmed"` (hold the
    /// slot until final).
    advance_after: false = "mined", true = "confirmed"
);
flag_words!(
    /// `on_external_nonce`: `"adopt"` (move the cursor up) or `"protect"`.
    on_external_nonce: false = "adopt", true = "protect"
);
flag_words!(
    /// `stuck_policy`: `"alert"` (report only) or `"cancel"`.
    stuck_policy: false = "alert", true = "cancel"
);
flag_words!(
    /// `fee_mode`: `"eip1559"` or `"legacy"` (`gas_price`).
    fee_mode: false = "eip1559", true = "legacy"
);

/// Parses a wei amount: a decimal or `0x`-prefixed hex integer.
pub fn parse_wei(s: &str) -> Result<u128, String> {
    let s = s.trim();
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() => u128::from_str_radix(hex, 16),
        Some(_) => return Err("empty hex amount".to_string()),
        None => s.parse::<u128>(),
    };
    parsed.map_err(|e| {
        format!("invalid wei amount {s:?} (expected a decimal or 0x hex integer): {e}")
    })
}

/// An optional wei amount. TOML integers stop at `i64::MAX` (about 9.2
/// ether), so the file also accepts a decimal string (`"100000000000"`) or a
/// hex string (`"0x174876e800"`); written back as a decimal string.
pub mod wei_option {
    use serde::{Deserializer, Serializer};

    /// Writes the amount as a decimal string; `None` as nothing.
    pub fn serialize<S: Serializer>(amount: &Option<u128>, s: S) -> Result<S::Ok, S::Error> {
        match amount {
            Some(amount) => s.serialize_str(&amount.to_string()),
            None => s.serialize_none(),
        }
    }

    /// Reads an integer, decimal string or hex string, if given.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u128>, D::Error> {
        d.deserialize_option(super::OptionalWei)
    }
}

/// A required wei amount, spelled as for [`wei_option`].
pub mod wei {
    use serde::{Deserializer, Serializer};

    /// Writes the amount as a decimal string.
    pub fn serialize<S: Serializer>(amount: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&amount.to_string())
    }

    /// Reads an integer, decimal string or hex string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        d.deserialize_any(super::Wei)
    }
}

struct OptionalWei;

impl<'de> Visitor<'de> for OptionalWei {
    type Value = Option<u128>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative wei amount (integer, decimal string or 0x hex string)")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Wei).map(Some)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Wei.visit_u64(v).map(Some)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Self::Value, E> {
        Wei.visit_u128(v).map(Some)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Wei.visit_i64(v).map(Some)
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Self::Value, E> {
        Wei.visit_i128(v).map(Some)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Wei.visit_str(v).map(Some)
    }
}

/// One wei amount, from any of its spellings.
struct Wei;

impl Visitor<'_> for Wei {
    type Value = u128;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative wei amount (integer, decimal string or 0x hex string)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u128, E> {
        Ok(u128::from(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<u128, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u128, E> {
        u128::try_from(v).map_err(|_| E::custom("wei amount must not be negative"))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<u128, E> {
        u128::try_from(v).map_err(|_| E::custom("wei amount must not be negative"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u128, E> {
        parse_wei(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[test]
    fn wei_parses_decimal_and_hex() {
        assert_eq!(parse_wei("100000000000"), Ok(100_000_000_000));
        assert_eq!(parse_wei("0x174876e800"), Ok(100_000_000_000));
        assert!(parse_wei("1e9").is_err());
        assert!(parse_wei("0x").is_err());
        assert!(parse_wei("-1").is_err());
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Override {
        #[serde(default, with = "stuck_policy::option")]
        policy: Option<bool>,
        #[serde(default, with = "wei_option")]
        cap: Option<u128>,
    }

    #[test]
    fn optional_words_and_amounts_read_what_is_given_and_inherit_what_is_not() {
        let given: Override =
            serde_json::from_str(r#"{"policy":"cancel","cap":"0x10"}"#).expect("given");
        assert_eq!(
            given,
            Override {
                policy: Some(true),
                cap: Some(16)
            }
        );
        let missing: Override = serde_json::from_str("{}").expect("missing");
        assert_eq!(missing, Override::default());
        let err = serde_json::from_str::<Override>(r#"{"policy":"panic"}"#).expect_err("bad word");
        assert!(
            err.to_string().contains("expected `alert` or `cancel`"),
            "{err}"
        );
        assert!(serde_json::from_str::<Override>(r#"{"cap":-1}"#).is_err());
        assert!(serde_json::from_str::<Override>(r#"{"cap":"1 gwei"}"#).is_err());
        let shown = serde_json::to_string(&Override {
            policy: Some(false),
            cap: Some(5),
        })
        .expect("ser");
        assert_eq!(shown, r#"{"policy":"alert","cap":"5"}"#);
    }
}
