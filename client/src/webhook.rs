//! Verifying a webhook delivery (README "Webhooks"): the daemon signs each
//! `POST` with `X-Txmgr-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
//! "<t>.<body>")>`. Verify the **raw body bytes**, before parsing them; a
//! timestamp outside the tolerance is refused, which refuses replays too.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use txmgr_client::webhook::{self, SIGNATURE_HEADER};
//!
//! # let secret = b"whsec"; let body = br#"{"id":"backend:1-1"}"#;
//! # let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
//! # let header_value = webhook::sign(secret, now, body);
//! // in your HTTP handler: the header's value and the body as received
//! let verified = webhook::verify(secret, &header_value, body, Duration::from_secs(300));
//! assert!(verified.is_ok());
//! # assert_eq!(SIGNATURE_HEADER, "x-txmgr-signature");
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying the signature (HTTP header names are case-insensitive).
///
/// ```
/// # let headers = std::collections::HashMap::from([("x-txmgr-signature", "t=1,v1=00")]);
/// let value = headers.get(txmgr_client::webhook::SIGNATURE_HEADER);
/// assert!(value.is_some());
/// ```
pub const SIGNATURE_HEADER: &str = "x-txmgr-signature";
/// The header carrying the delivery id: the same on every attempt, dedup on it
/// (it equals [`WebhookEvent::id`]).
///
/// ```
/// assert_eq!(txmgr_client::webhook::DELIVERY_HEADER, "x-txmgr-delivery");
/// ```
pub const DELIVERY_HEADER: &str = "x-txmgr-delivery";

/// Why a delivery was refused. Answer a forgery (the header, the clock or
/// the MAC) with a 4xx; answer [`WebhookError::InvalidBody`] — signed by the
/// daemon but not readable by this version, e.g. a newer daemon's new event
/// or state — with a 5xx, so the daemon retries it and, once its attempts
/// run out, keeps it as a dead letter to redeliver after you upgrade.
///
/// ```
/// use std::time::Duration;
/// use txmgr_client::webhook::{verify, WebhookError};
/// assert_eq!(verify(b"s", "t=+1,v1=00", b"{}", Duration::from_secs(300)), Err(WebhookError::MalformedHeader));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The header is not `t=<digits>,v1=<64 hex>` (a `t` with a sign or a
    /// leading zero is refused: the daemon never writes one).
    #[error("malformed signature header")]
    MalformedHeader,
    /// The timestamp is further from now than the tolerance.
    #[error("timestamp {timestamp} is more than {tolerance:?} from now")]
    TimestampOutOfTolerance {
        /// The header's `t`.
        timestamp: u64,
        /// The tolerance given.
        tolerance: Duration,
    },
    /// The MAC does not match the body with this secret.
    #[error("signature mismatch")]
    SignatureMismatch,
    /// The signature matched but the body is not a webhook event this
    /// version can read (answer 5xx, see above).
    #[error("the body is not a webhook event: {0}")]
    InvalidBody(String),
}

/// The body of a delivery, as the API crate defines it.
pub use txmgr_api::WebhookEvent;

/// Checks `header` (the `X-Txmgr-Signature` value) against the raw `body`
/// and the clock, in constant time; `Ok` when the daemon signed this body
/// with `secret` within `tolerance` of now.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use txmgr_client::webhook::{sign, verify, WebhookError};
/// let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
/// let header = sign(b"secret", now, b"{}");
/// assert_eq!(verify(b"secret", &header, b"{}", Duration::from_secs(300)), Ok(()));
/// assert_eq!(verify(b"other", &header, b"{}", Duration::from_secs(300)), Err(WebhookError::SignatureMismatch));
/// ```
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    tolerance: Duration,
) -> Result<(), WebhookError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    verify_at(secret, header, body, tolerance, now)
}

/// [`verify`], then the body read as a [`WebhookEvent`].
///
/// ```no_run
/// # fn handle(secret: &[u8], header: &str, raw_body: &[u8]) -> Result<(), txmgr_client::webhook::WebhookError> {
/// use std::time::Duration;
/// let event = txmgr_client::webhook::verify_event(secret, header, raw_body, Duration::from_secs(300))?;
/// println!("{} {:?} is {}", event.id, event.row.tx_id, event.row.state);
/// # Ok(()) }
/// ```
pub fn verify_event(
    secret: &[u8],
    header: &str,
    body: &[u8],
    tolerance: Duration,
) -> Result<WebhookEvent, WebhookError> {
    verify(secret, header, body, tolerance)?;
    serde_json::from_slice(body).map_err(|e| WebhookError::InvalidBody(e.to_string()))
}

/// [`verify`] at the given time (unix seconds), for tests.
///
/// ```
/// use std::time::Duration;
/// use txmgr_client::webhook::{sign, verify_at};
/// let header = sign(b"secret", 1_764_200_000, b"{}");
/// assert!(verify_at(b"secret", &header, b"{}", Duration::from_secs(300), 1_764_200_100).is_ok());
/// assert!(verify_at(b"secret", &header, b"{}", Duration::from_secs(300), 1_764_201_000).is_err());
/// ```
pub fn verify_at(
    secret: &[u8],
    header: &str,
    body: &[u8],
    tolerance: Duration,
    now: u64,
) -> Result<(), WebhookError> {
    let (timestamp, mac) = parse(header).ok_or(WebhookError::MalformedHeader)?;
    if now.abs_diff(timestamp) > tolerance.as_secs() {
        return Err(WebhookError::TimestampOutOfTolerance {
            timestamp,
            tolerance,
        });
    }
    keyed(secret, timestamp, body)
        .verify_slice(&mac)
        .map_err(|_| WebhookError::SignatureMismatch)
}

/// The header value the daemon would send for `body` at `unix_seconds`
/// (for a receiver's tests).
///
/// ```
/// let header = txmgr_client::webhook::sign(b"secret", 1_764_200_000, b"{}");
/// assert!(header.starts_with("t=1764200000,v1="));
/// ```
pub fn sign(secret: &[u8], unix_seconds: u64, body: &[u8]) -> String {
    let mac = keyed(secret, unix_seconds, body).finalize().into_bytes();
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={unix_seconds},v1={hex}")
}

fn keyed(secret: &[u8], unix_seconds: u64, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// `t` (canonical digits) and the 32-byte `v1` of a header.
fn parse(header: &str) -> Option<(u64, Vec<u8>)> {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => t = Some(canonical_seconds(value)?),
            Some(("v1", value)) => v1 = Some(hex32(value)?),
            _ => {}
        }
    }
    Some((t?, v1?))
}

/// Digits only, no leading zero: as the daemon writes it.
fn canonical_seconds(value: &str) -> Option<u64> {
    let canonical = !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_digit())
        && (value == "0" || !value.starts_with('0'));
    canonical.then(|| value.parse().ok()).flatten()
}

fn hex32(value: &str) -> Option<Vec<u8>> {
    if value.len() != 64 {
        return None;
    }
    (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(value.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"s3cret";
    const BODY: &[u8] = br#"{"id":"w:1-1"}"#;

    #[test]
    fn accepts_its_own_signature_and_refuses_every_change() {
        let now = 1_764_200_000;
        let header = sign(SECRET, now, BODY);
        let tolerance = Duration::from_secs(300);
        assert_eq!(
            verify_at(SECRET, &header, BODY, tolerance, now + 299),
            Ok(())
        );
        assert_eq!(
            verify_at(SECRET, &header, br#"{"id":"w:1-2"}"#, tolerance, now),
            Err(WebhookError::SignatureMismatch)
        );
        assert_eq!(
            verify_at(b"other", &header, BODY, tolerance, now),
            Err(WebhookError::SignatureMismatch)
        );
        assert!(matches!(
            verify_at(SECRET, &header, BODY, tolerance, now + 301),
            Err(WebhookError::TimestampOutOfTolerance { .. })
        ));
        let v1 = header
            .split_once(",v1=")
            .map(|(_, v1)| v1)
            .unwrap_or_default();
        for bad in [
            format!("t=+{now},v1={v1}"),
            format!("t=0{now},v1={v1}"),
            format!("t={now},v1={}", &v1[..63]),
            format!("v1={v1}"),
            String::new(),
        ] {
            assert_eq!(
                verify_at(SECRET, &bad, BODY, tolerance, now),
                Err(WebhookError::MalformedHeader),
                "{bad}"
            );
        }
    }
}
