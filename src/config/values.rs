//! Value types with their own syntax in `config.toml`: wei amounts and the
//! finality rule.

use std::fmt;

use serde::{
    de::{self, MapAccess, Visitor},
    Deserialize, Deserializer, Serialize, Serializer,
};

/// An amount of wei. TOML integers stop at `i64::MAX` (about 9.2 ether), so
/// the file also accepts a decimal string (`"100000000000"`) or a hex string
/// (`"0x174876e800"`). Printed back as a decimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Wei(pub u128);

impl Wei {
    /// Parses a decimal or `0x`-prefixed hex amount.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) if !hex.is_empty() => u128::from_str_radix(hex, 16),
            Some(_) => return Err("empty hex amount".to_string()),
            None => s.parse::<u128>(),
        };
        parsed.map(Wei).map_err(|e| {
            format!("invalid wei amount {s:?} (expected a decimal or 0x hex integer): {e}")
        })
    }
}

impl fmt::Display for Wei {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Wei {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for Wei {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(WeiVisitor)
    }
}

struct WeiVisitor;

impl Visitor<'_> for WeiVisitor {
    type Value = Wei;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative wei amount (integer, decimal string or 0x hex string)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Wei, E> {
        Ok(Wei(u128::from(v)))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Wei, E> {
        Ok(Wei(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Wei, E> {
        u128::try_from(v)
            .map(Wei)
            .map_err(|_| E::custom("wei amount must not be negative"))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Wei, E> {
        u128::try_from(v)
            .map(Wei)
            .map_err(|_| E::custom("wei amount must not be negative"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Wei, E> {
        Wei::parse(v).map_err(E::custom)
    }
}

/// When a mined transaction counts as final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    /// Final once the receipt's block has this many confirmations (the block
    /// itself counts as one). Written `{ confirmations = N }`.
    Confirmations(u64),
    /// Final once the receipt's block is at or below the node's `safe` tag.
    Safe,
    /// Final once the receipt's block is at or below the node's `finalized` tag.
    Finalized,
}

/// Default number of confirmations before a transaction is final.
pub const DEFAULT_CONFIRMATIONS: u64 = 12;

impl Default for Finality {
    fn default() -> Self {
        Self::Confirmations(DEFAULT_CONFIRMATIONS)
    }
}

impl Serialize for Finality {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Self::Confirmations(n) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("confirmations", n)?;
                map.end()
            }
            Self::Safe => s.serialize_str("safe"),
            Self::Finalized => s.serialize_str("finalized"),
        }
    }
}

impl<'de> Deserialize<'de> for Finality {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FinalityVisitor)
    }
}

struct FinalityVisitor;

const FINALITY_TAGS: &[&str] = &["safe", "finalized"];

impl<'de> Visitor<'de> for FinalityVisitor {
    type Value = Finality;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"`{ confirmations = N }`, "safe" or "finalized""#)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Finality, E> {
        match v {
            "safe" => Ok(Finality::Safe),
            "finalized" => Ok(Finality::Finalized),
            other => Err(E::unknown_variant(other, FINALITY_TAGS)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Finality, A::Error> {
        let mut confirmations = None;
        while let Some(key) = map.next_key::<String>()? {
            if key != "confirmations" {
                return Err(de::Error::unknown_field(&key, &["confirmations"]));
            }
            if confirmations.is_some() {
                return Err(de::Error::duplicate_field("confirmations"));
            }
            confirmations = Some(map.next_value::<u64>()?);
        }
        confirmations
            .map(Finality::Confirmations)
            .ok_or_else(|| de::Error::missing_field("confirmations"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wei_parses_decimal_and_hex() {
        assert_eq!(Wei::parse("100000000000"), Ok(Wei(100_000_000_000)));
        assert_eq!(Wei::parse("0x174876e800"), Ok(Wei(100_000_000_000)));
        assert!(Wei::parse("1e9").is_err());
        assert!(Wei::parse("0x").is_err());
        assert!(Wei::parse("-1").is_err());
    }

    #[derive(Deserialize, Serialize, Debug)]
    struct Holder {
        f: Finality,
        w: Wei,
    }

    #[test]
    fn finality_and_wei_round_trip_through_toml() {
        for (text, finality) in [
            ("f = \"safe\"\nw = 5", Finality::Safe),
            ("f = \"finalized\"\nw = \"0x5\"", Finality::Finalized),
            (
                "f = { confirmations = 3 }\nw = \"5\"",
                Finality::Confirmations(3),
            ),
        ] {
            let h: Holder = toml::from_str(text).expect("valid");
            assert_eq!(h.f, finality);
            assert_eq!(h.w, Wei(5));
            let back: Holder = toml::from_str(&toml::to_string(&h).expect("ser")).expect("de");
            assert_eq!(back.f, finality);
        }
        assert!(toml::from_str::<Holder>("f = \"latest\"\nw = 1").is_err());
        assert!(toml::from_str::<Holder>("f = { blocks = 3 }\nw = 1").is_err());
    }
}
