//! When a mined intent is final (README "Receipts, finality and reorgs"): the rule the finality
//! workers apply and the submitter's strict mode waits for.
//!
//! In `config.toml` it is written `finality = { confirmations = N }`,
//! `"safe"` or `"finalized"`.

use std::fmt;

use serde::{
    de::{self, MapAccess, Visitor},
    Deserialize, Deserializer, Serialize, Serializer,
};

/// A block tag that finality can follow (the domain's word for it; the
/// chain port asks the node for the tagged block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinalityTag {
    /// The chain's `safe` block.
    Safe,
    /// The chain's `finalized` block.
    Finalized,
}

/// Default number of confirmations before a mined intent is final.
pub const DEFAULT_CONFIRMATIONS: u64 = 12;

/// When a mined intent is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    /// The receipt's block has this many confirmations (itself included).
    Confirmations(u64),
    /// The receipt's block is at or below the chain's `safe`/`finalized` block.
    Tag(FinalityTag),
}

impl Default for Finality {
    fn default() -> Self {
        Self::Confirmations(DEFAULT_CONFIRMATIONS)
    }
}

/// The words of the tags, in the order of [`FinalityTag`]'s variants.
const TAG_WORDS: &[&str] = &["safe", "finalized"];

impl Serialize for Finality {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Self::Confirmations(n) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("confirmations", n)?;
                map.end()
            }
            Self::Tag(FinalityTag::Safe) => s.serialize_str(TAG_WORDS[0]),
            Self::Tag(FinalityTag::Finalized) => s.serialize_str(TAG_WORDS[1]),
        }
    }
}

impl<'de> Deserialize<'de> for Finality {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FinalityVisitor)
    }
}

struct FinalityVisitor;

impl<'de> Visitor<'de> for FinalityVisitor {
    type Value = Finality;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"`{ confirmations = N }`, "safe" or "finalized""#)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Finality, E> {
        match v {
            "safe" => Ok(Finality::Tag(FinalityTag::Safe)),
            "finalized" => Ok(Finality::Tag(FinalityTag::Finalized)),
            other => Err(E::unknown_variant(other, TAG_WORDS)),
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

/// The finality workers' decision on one mined intent: final now, and
/// whether its receipt says it succeeded (status 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalDecision {
    /// The intent.
    pub tx_id: uuid::Uuid,
    /// Receipt status 1: CONFIRMED; otherwise FAILED_FINAL.
    pub succeeded: bool,
}

/// A recorded receipt whose block is no longer canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReorgedReceipt {
    /// The intent.
    pub tx_id: uuid::Uuid,
    /// The block the receipt was recorded in.
    pub block_hash: alloy::primitives::B256,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Serialize, Debug)]
    struct Holder {
        f: Finality,
    }

    fn parse(text: &str) -> Result<Finality, serde_json::Error> {
        serde_json::from_str::<Holder>(text).map(|h| h.f)
    }

    #[test]
    fn finality_is_a_tag_word_or_a_confirmations_table_and_round_trips() {
        for (text, finality) in [
            (r#"{"f":"safe"}"#, Finality::Tag(FinalityTag::Safe)),
            (
                r#"{"f":"finalized"}"#,
                Finality::Tag(FinalityTag::Finalized),
            ),
            (r#"{"f":{"confirmations":3}}"#, Finality::Confirmations(3)),
        ] {
            assert_eq!(parse(text).expect("valid"), finality);
            let back = serde_json::to_string(&Holder { f: finality }).expect("ser");
            assert_eq!(back, text);
        }
        assert!(parse(r#"{"f":"latest"}"#).is_err());
        assert!(parse(r#"{"f":{"blocks":3}}"#).is_err());
        assert!(parse(r#"{"f":{}}"#).is_err());
    }
}
