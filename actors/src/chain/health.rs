//! The health of one RPC endpoint, as a small state machine without I/O:
//! fed with call outcomes and probed heads, it says whether the endpoint may
//! serve reads and sends, and when to probe it next.
//!
//! An endpoint is unhealthy after `failures_to_unhealthy` consecutive
//! transport failures (answers such as "nonce too low" are not failures), or
//! while its head lags the best known head by more than `max_head_lag`
//! blocks, or until its chain id has been verified. An unhealthy endpoint is
//! probed with exponential backoff until a probe succeeds.

use std::time::{Duration, Instant};

/// When an endpoint counts as unhealthy, and how it is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Consecutive transport failures that make an endpoint unhealthy.
    pub failures_to_unhealthy: u32,
    /// Blocks an endpoint's head may lag the best head before it is unhealthy.
    pub max_head_lag: u64,
    /// Probe period of a healthy endpoint, and first backoff of an unhealthy one.
    pub probe_interval: Duration,
    /// Longest wait between probes of an unhealthy endpoint.
    pub max_probe_backoff: Duration,
}

/// Why an endpoint is not serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unhealthy {
    /// Its chain id has not been confirmed yet (unreachable at start).
    Unverified,
    /// Consecutive transport failures reached the threshold.
    Failing,
    /// Its head is this many blocks behind the best.
    Lagging(u64),
}

/// The health of one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    policy: HealthPolicy,
    verified: bool,
    consecutive_failures: u32,
    head: Option<u64>,
    lag: u64,
    last_error: Option<String>,
    backoff: Duration,
    next_probe: Instant,
    /// Since when the current verdict (healthy or not) holds.
    since: Instant,
    was_healthy: bool,
}

impl Health {
    /// A fresh endpoint; `verified` once its chain id was checked.
    pub(crate) fn new(policy: HealthPolicy, verified: bool, now: Instant) -> Self {
        Self {
            policy,
            verified,
            consecutive_failures: 0,
            head: None,
            lag: 0,
            last_error: None,
            backoff: policy.probe_interval,
            next_probe: now,
            since: now,
            was_healthy: verified,
        }
    }

    /// Why it may not serve, or `None` when it may.
    pub(crate) fn verdict(&self) -> Option<Unhealthy> {
        if !self.verified {
            Some(Unhealthy::Unverified)
        } else if self.consecutive_failures >= self.policy.failures_to_unhealthy {
            Some(Unhealthy::Failing)
        } else if self.lag > self.policy.max_head_lag {
            Some(Unhealthy::Lagging(self.lag))
        } else {
            None
        }
    }

    /// True when it may serve reads and sends.
    pub(crate) fn is_healthy(&self) -> bool {
        self.verdict().is_none()
    }

    /// Verified and not failing: it may take sends even while its head
    /// lags (its pool still reaches the network).
    pub(crate) fn is_reachable(&self) -> bool {
        self.verified && self.consecutive_failures < self.policy.failures_to_unhealthy
    }

    /// Whether its chain id is confirmed.
    pub(crate) fn is_verified(&self) -> bool {
        self.verified
    }

    /// The chain id was confirmed.
    pub(crate) fn verified(&mut self, now: Instant) -> bool {
        self.verified = true;
        self.settle(now)
    }

    /// The endpoint answered (a result or a JSON-RPC error: both are answers).
    /// Returns true when its verdict changed.
    pub(crate) fn answered(&mut self, now: Instant) -> bool {
        self.consecutive_failures = 0;
        self.settle(now)
    }

    /// A transport failure (timeout, connection, HTTP error). Returns true
    /// when its verdict changed.
    pub(crate) fn failed(&mut self, error: &str, now: Instant) -> bool {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.last_error = Some(error.to_owned());
        self.settle(now)
    }

    /// A probe read `head`; `best` is the highest head of any serving
    /// endpoint. Returns true when its verdict changed.
    pub(crate) fn head_seen(&mut self, head: u64, best: u64, now: Instant) -> bool {
        self.head = Some(head);
        self.lag = best.saturating_sub(head);
        self.settle(now)
    }

    /// Whether a probe is due, and books the next one: every
    /// `probe_interval` while healthy, with doubling backoff while not.
    pub(crate) fn probe_due(&mut self, now: Instant) -> bool {
        if now < self.next_probe {
            return false;
        }
        let wait = if self.is_healthy() {
            self.backoff = self.policy.probe_interval;
            self.policy.probe_interval
        } else {
            let wait = self.backoff;
            self.backoff = (self.backoff * 2).min(self.policy.max_probe_backoff);
            wait
        };
        self.next_probe = now + wait;
        true
    }

    /// The last head a probe read.
    pub(crate) fn head(&self) -> Option<u64> {
        self.head
    }

    /// Blocks behind the best head at the last probe.
    pub(crate) fn lag(&self) -> u64 {
        self.lag
    }

    /// Consecutive transport failures so far.
    pub(crate) fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The last transport failure's text (already free of URLs).
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Since when the current verdict holds.
    pub(crate) fn since(&self) -> Instant {
        self.since
    }

    fn settle(&mut self, now: Instant) -> bool {
        let healthy = self.is_healthy();
        if healthy == self.was_healthy {
            return false;
        }
        self.was_healthy = healthy;
        self.since = now;
        if healthy {
            self.backoff = self.policy.probe_interval;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HealthPolicy {
        HealthPolicy {
            failures_to_unhealthy: 3,
            max_head_lag: 5,
            probe_interval: Duration::from_secs(1),
            max_probe_backoff: Duration::from_secs(8),
        }
    }

    #[test]
    fn consecutive_transport_failures_make_it_unhealthy_and_an_answer_heals() {
        let now = Instant::now();
        let mut health = Health::new(policy(), true, now);
        assert!(!health.failed("refused", now));
        assert!(!health.failed("refused", now));
        assert!(
            health.failed("refused", now),
            "third failure flips the verdict"
        );
        assert_eq!(health.verdict(), Some(Unhealthy::Failing));
        assert_eq!(health.last_error(), Some("refused"));
        assert!(health.answered(now));
        assert!(health.is_healthy());
    }

    #[test]
    fn lagging_beyond_the_bound_is_unhealthy_until_it_catches_up() {
        let now = Instant::now();
        let mut health = Health::new(policy(), true, now);
        assert!(
            !health.head_seen(95, 100, now),
            "5 behind is within the bound"
        );
        assert!(health.head_seen(94, 100, now));
        assert_eq!(health.verdict(), Some(Unhealthy::Lagging(6)));
        assert!(health.head_seen(100, 100, now));
        assert!(health.is_healthy());
    }

    #[test]
    fn unverified_endpoints_do_not_serve() {
        let now = Instant::now();
        let mut health = Health::new(policy(), false, now);
        assert_eq!(health.verdict(), Some(Unhealthy::Unverified));
        assert!(health.verified(now));
        assert!(health.is_healthy());
    }

    #[test]
    fn unhealthy_endpoints_are_probed_with_capped_doubling_backoff() {
        let start = Instant::now();
        let mut health = Health::new(policy(), true, start);
        for _ in 0..3 {
            health.failed("down", start);
        }
        let mut now = start;
        let mut waits = Vec::new();
        for _ in 0..6 {
            assert!(health.probe_due(now));
            assert!(!health.probe_due(now), "booked, not due twice");
            let next = health.next_probe;
            waits.push((next - now).as_secs());
            now = next;
        }
        assert_eq!(waits, vec![1, 2, 4, 8, 8, 8]);
        health.answered(now);
        assert!(health.probe_due(now));
        assert_eq!(
            (health.next_probe - now).as_secs(),
            1,
            "healthy again: every interval"
        );
    }
}
