//! When a call is repeated, and how long it waits first.
//!
//! Retried: no answer, 429 (`overloaded`, `rate_limited`), 503 and other 5xx
//! — never earlier than the answer's `Retry-After`. Never retried: any other
//! 4xx. Backoff is exponential with full jitter.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use crate::Error;

/// How a call is repeated after a failure that may pass.
///
/// ```
/// use std::time::Duration;
/// use txmgr_client::RetryPolicy;
/// let patient = RetryPolicy { max_attempts: 20, ..RetryPolicy::default() };
/// assert_eq!(patient.initial_backoff, Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The first backoff; it doubles with each attempt.
    pub initial_backoff: Duration,
    /// The longest backoff (before jitter).
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited out: the error is
    /// returned, with `retry_after`, for the caller to decide.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Which failures a call may repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Idempotent calls (reads, a create with its request id, cancel): no
    /// answer, 429 and 5xx.
    Safe,
    /// Actions a lost answer could make happen twice (speed-up,
    /// re-broadcast, requeue): only answers that say nothing was done
    /// (429, 503 `busy`).
    RefusedOnly,
}

impl RetryPolicy {
    /// How long to wait before attempt `attempt + 1` after `error`, or
    /// `None` when the error is final.
    pub(crate) fn delay(&self, attempt: u32, error: &Error, repeat: Repeat) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let retry_after = match error {
            Error::Transport { .. } if repeat == Repeat::Safe => None,
            Error::Api {
                status,
                retry_after,
                detail,
                ..
            } => {
                let refused =
                    *status == 429 || (*status == 503 && detail.code == txmgr_api::ErrorCode::Busy);
                let retryable = refused || (repeat == Repeat::Safe && *status >= 500);
                if !retryable {
                    return None;
                }
                *retry_after
            }
            Error::UnexpectedAnswer {
                status,
                retry_after,
                ..
            } if *status == 429 || (repeat == Repeat::Safe && *status >= 500) => *retry_after,
            _ => return None,
        };
        if retry_after.is_some_and(|after| after > self.max_retry_after) {
            return None;
        }
        let backoff = self.backoff(attempt);
        Some(retry_after.map_or(backoff, |after| after.max(backoff / 2)))
    }

    /// Exponential backoff with full jitter for the attempt after `attempt`.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let doubled = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let ceiling = doubled.min(self.max_backoff);
        ceiling.mul_f64(0.5 + 0.5 * jitter())
    }
}

/// A number in `[0, 1)`, different on every call (no RNG dependency: the
/// standard library's randomly keyed hasher).
fn jitter() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x0074_786d_6772);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Reads `Retry-After` in seconds (the daemon sends integers; an HTTP date
/// is not used by it and reads as absent).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use txmgr_api::{ErrorCode, ErrorDetail};

    fn api(status: u16, code: ErrorCode, retry_after: Option<u64>) -> Error {
        Error::Api {
            status,
            detail: Box::new(ErrorDetail {
                code,
                message: String::new(),
                field: None,
                issues: None,
                owner: None,
                rule: None,
                tx_id: None,
            }),
            retry_after: retry_after.map(Duration::from_secs),
            request_id: None,
        }
    }

    #[test]
    fn a_4xx_is_final_and_429_waits_out_retry_after() {
        let policy = RetryPolicy::default();
        let bad = api(400, ErrorCode::InvalidRequest, None);
        assert_eq!(policy.delay(1, &bad, Repeat::Safe), None);
        let conflict = api(409, ErrorCode::IdempotencyConflict, None);
        assert_eq!(policy.delay(1, &conflict, Repeat::Safe), None);
        let limited = api(429, ErrorCode::RateLimited, Some(3));
        let wait = policy.delay(1, &limited, Repeat::Safe).expect("retried");
        assert!(wait >= Duration::from_secs(3), "{wait:?}");
        let too_long = api(429, ErrorCode::RateLimited, Some(600));
        assert_eq!(policy.delay(1, &too_long, Repeat::Safe), None);
        assert_eq!(policy.delay(8, &limited, Repeat::Safe), None);
    }

    #[test]
    fn actions_that_could_act_twice_repeat_only_refusals() {
        let policy = RetryPolicy::default();
        let unavailable = api(503, ErrorCode::Unavailable, None);
        assert!(policy.delay(1, &unavailable, Repeat::Safe).is_some());
        assert_eq!(policy.delay(1, &unavailable, Repeat::RefusedOnly), None);
        let busy = api(503, ErrorCode::Busy, Some(1));
        assert!(policy.delay(1, &busy, Repeat::RefusedOnly).is_some());
    }

    #[test]
    fn a_proxys_429_is_waited_out_too() {
        let policy = RetryPolicy::default();
        let page = Error::UnexpectedAnswer {
            status: 429,
            reason: "html".into(),
            retry_after: Some(Duration::from_secs(5)),
            request_id: None,
        };
        let wait = policy
            .delay(1, &page, Repeat::RefusedOnly)
            .expect("retried");
        assert!(wait >= Duration::from_secs(5), "{wait:?}");
        let bad_gateway = Error::UnexpectedAnswer {
            status: 502,
            reason: "html".into(),
            retry_after: None,
            request_id: None,
        };
        assert!(policy.delay(1, &bad_gateway, Repeat::Safe).is_some());
        assert_eq!(policy.delay(1, &bad_gateway, Repeat::RefusedOnly), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_ceiling() {
        let policy = RetryPolicy::default();
        for attempt in 1..20 {
            let wait = policy.backoff(attempt);
            assert!(wait <= policy.max_backoff, "{attempt}: {wait:?}");
            assert!(wait >= policy.initial_backoff / 2, "{attempt}: {wait:?}");
        }
    }
}
