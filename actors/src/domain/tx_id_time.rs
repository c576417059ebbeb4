//! Intent ids are UUIDv7: their first 48 bits are the creation time in Unix
//! milliseconds, so byte order (PostgreSQL's `uuid` order) is creation
//! order. History retention walks `managed_tx` by it and tells an id that
//! aged out by it (`store::history_retention`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The smallest UUIDv7 of `at`'s millisecond: every id created before it
/// sorts below it (UUIDs compare byte by byte, and a v7 id starts with its
/// 48-bit Unix time in milliseconds).
pub fn uuid_v7_floor(at: DateTime<Utc>) -> Uuid {
    let millis = u64::try_from(at.timestamp_millis()).unwrap_or(0) & 0xFFFF_FFFF_FFFF;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    Uuid::from_bytes(bytes)
}

/// The creation time (Unix milliseconds) a UUIDv7 carries; None for any
/// other version.
pub fn uuid_v7_millis(id: Uuid) -> Option<i64> {
    if id.get_version_num() != 7 {
        return None;
    }
    let bytes = id.as_bytes();
    let mut millis = [0u8; 8];
    millis[2..].copy_from_slice(&bytes[..6]);
    i64::try_from(u64::from_be_bytes(millis)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    #[test]
    fn the_floor_sorts_between_ids_of_earlier_and_later_milliseconds() {
        let at = DateTime::from_timestamp_millis(1_800_000_000_123).expect("time");
        let floor = uuid_v7_floor(at);
        let before = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_800_000_000,
            122_000_000,
        ));
        let same = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_800_000_000,
            123_000_000,
        ));
        assert!(before < floor, "{before} < {floor}");
        assert!(floor <= same, "{floor} <= {same}");
        assert_eq!(uuid_v7_millis(same), Some(1_800_000_000_123));
        assert_eq!(uuid_v7_millis(Uuid::new_v4()), None);
    }
}
