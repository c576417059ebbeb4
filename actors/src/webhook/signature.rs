//! The signature a receiver verifies (README "Webhooks"):
//! `X-Txmgr-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
//!
//! The timestamp is signed with the body, so a receiver that rejects
//! timestamps older than its tolerance rejects replays too.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "x-txmgr-signature";

/// The `X-Txmgr-Signature` value for `body` sent at `unix_seconds`.
pub fn sign(secret: &[u8], unix_seconds: u64, body: &[u8]) -> String {
    format!(
        "t={unix_seconds},v1={}",
        hex_mac(secret, unix_seconds, body)
    )
}

/// Hex of HMAC-SHA256(secret, "<t>.<body>").
fn hex_mac(secret: &[u8], unix_seconds: u64, body: &[u8]) -> String {
    // HMAC accepts keys of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks a header value as a receiver would: the MAC matches and the
/// timestamp is within `tolerance_secs` of `now`. For tests and examples.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: u64, tolerance_secs: u64) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = canonical_seconds(value),
            Some(("v1", value)) => v1 = Some(value),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let expected = hex_mac(secret, t, body);
    now.abs_diff(t) <= tolerance_secs
        && expected.len() == v1.len()
        && expected
            .bytes()
            .zip(v1.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// `t=` as the sender writes it: decimal digits, no sign and no leading
/// zero (Rust's `u64` parser would take `+1700000000` or `01700000000`,
/// texts the sender never signs; a receiver must refuse them, not verify
/// the canonical number in their place).
fn canonical_seconds(value: &str) -> Option<u64> {
    let seconds = value.parse::<u64>().ok()?;
    (seconds.to_string() == value).then_some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_an_independent_hmac_sha256() {
        // python3 -c 'import hmac,hashlib;
        //   print(hmac.new(b"secret", b"1700000000.{}", hashlib.sha256).hexdigest())'
        assert_eq!(
            sign(b"secret", 1_700_000_000, b"{}"),
            "t=1700000000,v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163"
        );
    }

    #[test]
    fn verifies_its_own_signature_within_the_tolerance_only() {
        let header = sign(b"k", 1000, b"body");
        assert!(verify(b"k", &header, b"body", 1100, 300));
        assert!(!verify(b"k", &header, b"body", 1400, 300), "too old");
        assert!(!verify(b"k", &header, b"other", 1000, 300), "other body");
        assert!(!verify(b"other", &header, b"body", 1000, 300), "other key");
        assert!(!verify(b"k", "garbage", b"body", 1000, 300));
    }

    #[test]
    fn a_timestamp_written_otherwise_than_the_sender_writes_it_is_refused() {
        let header = sign(b"k", 1000, b"body");
        let v1 = header.split_once(",v1=").expect("v1").1;
        for t in ["+1000", "01000", " 1000", "1000 ", "1e3", "-1000", ""] {
            let altered = format!("t={t},v1={v1}");
            assert!(!verify(b"k", &altered, b"body", 1000, 300), "{altered}");
        }
        assert!(verify(b"k", &format!("t=1000,v1={v1}"), b"body", 1000, 300));
    }
}
