//! The position in the completion feed: `(xid, seq)` of the last row served,
//! handed to clients as an opaque token (see `store::completions` for why
//! the feed is paged by it).

use std::{fmt, str::FromStr};

/// A position in the feed: the `(xid, seq)` of the last row served. Clients
/// see it as an opaque token ([`FeedCursor::to_token`] / [`FeedCursor::parse`]),
/// so its form may change without breaking them beyond a restart of paging.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeedCursor {
    /// Id of the transaction that wrote the row (`xid8`, never wraps).
    xid: u64,
    /// The row's `seq`; orders rows written by one transaction.
    seq: i64,
}

/// A cursor token this API did not hand out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid completion cursor {0:?}: expected a token returned as `cursor` or `next_after`")]
pub struct InvalidFeedCursor(pub String);

impl FeedCursor {
    /// The cursor of the row `(xid, seq)`.
    pub fn new(xid: u64, seq: i64) -> Self {
        Self { xid, seq }
    }

    /// Transaction id of the row the cursor points at.
    pub fn xid(&self) -> u64 {
        self.xid
    }

    /// `seq` of the row the cursor points at.
    pub fn seq(&self) -> i64 {
        self.seq
    }

    /// The token clients pass back: `<xid>-<seq>` in decimal.
    pub fn to_token(&self) -> String {
        format!("{}-{}", self.xid, self.seq)
    }

    /// Reads a token written by [`FeedCursor::to_token`]; anything else —
    /// signs, spaces, missing or extra parts, out-of-range numbers — is refused.
    pub fn parse(token: &str) -> Result<FeedCursor, InvalidFeedCursor> {
        let invalid = || InvalidFeedCursor(token.to_owned());
        let (xid, seq) = token.split_once('-').ok_or_else(invalid)?;
        let xid = digits(xid).ok_or_else(invalid)?;
        let seq = digits(seq).ok_or_else(invalid)?;
        Ok(FeedCursor {
            xid,
            seq: i64::try_from(seq).map_err(|_| invalid())?,
        })
    }
}

/// A non-empty run of ASCII digits as a number (`u64::from_str` would also
/// take a `+`).
pub(super) fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for FeedCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_token())
    }
}

impl FromStr for FeedCursor {
    type Err = InvalidFeedCursor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FeedCursor::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_token_round_trips() {
        let cursor = FeedCursor::new(4_294_967_301, 42);
        assert_eq!(cursor.to_token(), "4294967301-42");
        assert_eq!(FeedCursor::parse(&cursor.to_token()), Ok(cursor));
        assert_eq!("0-0".parse::<FeedCursor>(), Ok(FeedCursor::new(0, 0)));
    }

    #[test]
    fn cursor_refuses_foreign_tokens() {
        for bad in [
            "",
            "-",
            "1",
            "1-",
            "-1",
            "1--1",
            "1-2-3",
            "+1-2",
            "1-+2",
            " 1-2",
            "1-2 ",
            "a-b",
            "18446744073709551616-1",
            "1-9223372036854775808",
            "MTIzLTQ1Ng",
        ] {
            let err = FeedCursor::parse(bad).expect_err(bad);
            assert_eq!(err, InvalidFeedCursor(bad.to_owned()));
        }
    }

    #[test]
    fn cursors_order_by_xid_then_seq() {
        // A lower xid sorts first even with a higher seq: that is the order served.
        assert!(FeedCursor::new(10, 99) < FeedCursor::new(11, 1));
        assert!(FeedCursor::new(10, 1) < FeedCursor::new(10, 2));
    }
}
