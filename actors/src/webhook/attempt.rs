//! One HTTP attempt of a webhook delivery and what it means for the next
//! one: delivered, retry later (timeouts, connection errors, 5xx, 429 — with
//! `Retry-After` honoured), or refused for good (any other status).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;
use reqwest::{header::HeaderMap, Client, StatusCode};

use super::signature::{sign, SIGNATURE_HEADER};

/// Header with the delivery id, the same on every attempt of one event.
pub const DELIVERY_HEADER: &str = "x-txmgr-delivery";
/// Header with the attempt number (1 for the first).
pub const ATTEMPT_HEADER: &str = "x-txmgr-attempt";
/// Header with the event name (`CONFIRMED`, `LOW_BALANCE`, …).
pub const EVENT_HEADER: &str = "x-txmgr-event";
/// The longest `Retry-After` honoured; a longer one is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AttemptOutcome {
    /// A 2xx answer.
    Delivered,
    /// Worth retrying: a timeout, a connection error, a 5xx or a 429.
    Retry {
        /// The status, when there was an answer.
        status: Option<u16>,
        /// What happened, for the dead letter and the ops view.
        error: String,
        /// The receiver's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// Any other answer (4xx, 3xx …): retrying would not help.
    Refused {
        /// The status.
        status: u16,
        /// What happened.
        error: String,
    },
}

/// One request: the body is fixed per event, the signature per attempt.
#[derive(Debug, Clone)]
pub(super) struct AttemptRequest<'a> {
    /// Target URL.
    pub(super) url: &'a str,
    /// Signing secret.
    pub(super) secret: &'a [u8],
    /// The delivery id.
    pub(super) delivery_id: &'a str,
    /// The event name.
    pub(super) event: &'a str,
    /// 1 for the first attempt.
    pub(super) attempt: u32,
    /// The JSON body.
    pub(super) body: &'a [u8],
    /// The delivery span's W3C `traceparent`, when the intent is traced.
    pub(super) traceparent: Option<&'a str>,
}

/// Sends one attempt (the client carries the timeout).
pub(super) async fn send(client: &Client, request: &AttemptRequest<'_>) -> AttemptOutcome {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut post = client.post(request.url);
    if let Some(traceparent) = request.traceparent {
        post = post.header("traceparent", traceparent);
    }
    let answer = post
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(DELIVERY_HEADER, request.delivery_id)
        .header(ATTEMPT_HEADER, request.attempt.to_string())
        .header(EVENT_HEADER, request.event)
        .header(SIGNATURE_HEADER, sign(request.secret, now, request.body))
        .body(request.body.to_vec())
        .send()
        .await;
    match answer {
        Ok(response) => classify(response.status(), response.headers()),
        Err(err) => AttemptOutcome::Retry {
            status: None,
            error: describe(err),
            retry_after: None,
        },
    }
}

/// The outcome of an answer with `status`.
fn classify(status: StatusCode, headers: &HeaderMap) -> AttemptOutcome {
    let code = status.as_u16();
    if status.is_success() {
        AttemptOutcome::Delivered
    } else if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        AttemptOutcome::Retry {
            status: Some(code),
            error: format!("HTTP {code}"),
            retry_after: retry_after(headers),
        }
    } else {
        AttemptOutcome::Refused {
            status: code,
            error: format!("HTTP {code} (not retried)"),
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not used by receivers
/// we know of; it falls back to the backoff).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// A transport error without the URL (which may carry a token).
fn describe(err: reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timeout"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_request() {
        "request failed"
    } else {
        "transport error"
    };
    let err = err.without_url();
    let mut detail = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        detail = format!("{detail}: {cause}");
        source = cause.source();
    }
    let detail: String = detail.chars().take(300).collect();
    format!("{kind}: {detail}")
}

/// The wait before attempt `next_attempt` (≥ 2): `initial × 2^(n−2)` capped
/// at `max`, with jitter (a random point in its upper half), and never less
/// than the receiver's `Retry-After`.
pub(super) fn backoff(
    next_attempt: u32,
    initial: Duration,
    max: Duration,
    retry_after: Option<Duration>,
) -> Duration {
    let exponent = next_attempt.saturating_sub(2).min(30);
    let full = initial.saturating_mul(1u32 << exponent).min(max);
    let half = full / 2;
    let jittered = half + rand::rng().random_range(Duration::ZERO..=half);
    retry_after.map_or(jittered, |asked| jittered.max(asked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_delivered_retried_or_refused() {
        let none = HeaderMap::new();
        assert_eq!(classify(StatusCode::OK, &none), AttemptOutcome::Delivered);
        assert_eq!(
            classify(StatusCode::NO_CONTENT, &none),
            AttemptOutcome::Delivered
        );
        for retried in [500, 502, 503, 504, 429] {
            let status = StatusCode::from_u16(retried).expect("status");
            assert!(
                matches!(classify(status, &none), AttemptOutcome::Retry { .. }),
                "{retried}"
            );
        }
        for refused in [400, 401, 403, 404, 410, 301] {
            let status = StatusCode::from_u16(refused).expect("status");
            assert!(
                matches!(classify(status, &none), AttemptOutcome::Refused { .. }),
                "{refused}"
            );
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        let mut headers = HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "7".parse().expect("value"));
        assert_eq!(
            classify(StatusCode::TOO_MANY_REQUESTS, &headers),
            AttemptOutcome::Retry {
                status: Some(429),
                error: "HTTP 429".into(),
                retry_after: Some(Duration::from_secs(7)),
            }
        );
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "999999".parse().expect("value"),
        );
        assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("value"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_its_cap_and_respects_retry_after() {
        let (initial, max) = (Duration::from_millis(100), Duration::from_secs(1));
        for _ in 0..50 {
            let second = backoff(2, initial, max, None);
            assert!(second >= initial / 2 && second <= initial, "{second:?}");
            let fourth = backoff(4, initial, max, None);
            assert!(fourth >= initial * 2 && fourth <= initial * 4, "{fourth:?}");
            let late = backoff(40, initial, max, None);
            assert!(late >= max / 2 && late <= max, "{late:?}");
            let asked = backoff(2, initial, max, Some(Duration::from_secs(5)));
            assert_eq!(asked, Duration::from_secs(5));
        }
    }
}
