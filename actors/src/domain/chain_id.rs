//! The EIP-155 chain id, and its one conversion to the database's `BIGINT`.

use std::fmt;

use sqlx::{
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueRef},
    Decode, Encode, Postgres, Type,
};

/// An EIP-155 chain id. Every table keyed by submitter carries it, as a
/// `BIGINT`: binding a `ChainId` is the only way the engine writes one, and
/// the conversion is checked there (configuration validation refuses ids
/// above `i64::MAX`, so the check never fires in a validated deployment —
/// but if it did, the statement fails instead of naming another chain).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainId(u64);

/// A chain id that does not fit the database's `BIGINT`, or a stored one
/// that is negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("chain id {0} does not fit a BIGINT")]
pub struct ChainIdOutOfRange(pub i128);

impl ChainId {
    /// The chain id as the chain and the signer know it.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The chain id as stored (`BIGINT`): the one checked conversion.
    pub fn to_db(self) -> Result<i64, ChainIdOutOfRange> {
        i64::try_from(self.0).map_err(|_| ChainIdOutOfRange(i128::from(self.0)))
    }

    /// Reads a stored chain id.
    pub fn from_db(stored: i64) -> Result<Self, ChainIdOutOfRange> {
        u64::try_from(stored)
            .map(ChainId)
            .map_err(|_| ChainIdOutOfRange(i128::from(stored)))
    }
}

impl From<u64> for ChainId {
    fn from(id: u64) -> Self {
        ChainId(id)
    }
}

impl From<ChainId> for u64 {
    fn from(id: ChainId) -> Self {
        id.0
    }
}

impl fmt::Display for ChainId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for ChainId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Type<Postgres> for ChainId {
    fn type_info() -> PgTypeInfo {
        <i64 as Type<Postgres>>::type_info()
    }
}

impl PgHasArrayType for ChainId {
    fn array_type_info() -> PgTypeInfo {
        <i64 as PgHasArrayType>::array_type_info()
    }
}

impl Encode<'_, Postgres> for ChainId {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Postgres>>::encode_by_ref(&self.to_db()?, buf)
    }
}

impl Decode<'_, Postgres> for ChainId {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        Ok(ChainId::from_db(<i64 as Decode<Postgres>>::decode(value)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_a_bigint_up_to_i64_max_only() {
        assert_eq!(ChainId::from(31337).to_db(), Ok(31337));
        let max = u64::try_from(i64::MAX).expect("i64::MAX is positive");
        assert_eq!(ChainId::from(max).to_db(), Ok(i64::MAX));
        assert_eq!(
            ChainId::from(max + 1).to_db(),
            Err(ChainIdOutOfRange(i128::from(max + 1)))
        );
    }

    #[test]
    fn a_negative_stored_id_is_refused() {
        assert_eq!(ChainId::from_db(1), Ok(ChainId::from(1)));
        assert_eq!(ChainId::from_db(-1), Err(ChainIdOutOfRange(-1)));
    }

    #[test]
    fn shows_as_the_bare_number() {
        assert_eq!(ChainId::from(31337).to_string(), "31337");
        assert_eq!(format!("{:?}", ChainId::from(1)), "1");
    }
}
