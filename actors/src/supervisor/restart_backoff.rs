//! The restart backoff of a tracking actor: 100 ms doubling to 10 s, back
//! to the start after it has run a healthy while.

use std::time::{Duration, Instant};

/// First restart delay of a tracking actor.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest restart delay.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Running this long since its last restart makes the next failure count as
/// a first one again (backoff back to [`FIRST_BACKOFF`]).
const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// The child and the reason of a supervision event that ended a child (it
/// stopped, or it failed); `None` for other events.
pub(crate) fn ended_child(event: ractor::SupervisionEvent) -> Option<(ractor::ActorCell, String)> {
    match event {
        ractor::SupervisionEvent::ActorTerminated(cell, _, reason) => {
            Some((cell, reason.unwrap_or_else(|| "stopped".into())))
        }
        ractor::SupervisionEvent::ActorFailed(cell, err) => Some((cell, err.to_string())),
        _ => None,
    }
}

/// Restart bookkeeping of one tracking actor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Restarts {
    /// Since the node started (shown, and never reset).
    pub(crate) total: u32,
    /// Since it last ran [`HEALTHY_AFTER`] without failing (sets the backoff).
    consecutive: u32,
    /// When the last restart was scheduled.
    last: Option<Instant>,
}

impl Restarts {
    /// Records a failure at `now` and returns the delay before the restart:
    /// 100 ms doubling to 10 s, back to 100 ms after a healthy period.
    pub(crate) fn next_delay(&mut self, now: Instant) -> Duration {
        if self
            .last
            .is_some_and(|last| now.duration_since(last) >= HEALTHY_AFTER)
        {
            self.consecutive = 0;
        }
        let delay = FIRST_BACKOFF
            .saturating_mul(1 << self.consecutive.min(16))
            .min(MAX_BACKOFF);
        self.consecutive = self.consecutive.saturating_add(1);
        self.total = self.total.saturating_add(1);
        self.last = Some(now);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_resets_after_a_healthy_period() {
        let mut restarts = Restarts::default();
        let start = Instant::now();
        let delays: Vec<Duration> = (0..10).map(|_| restarts.next_delay(start)).collect();
        assert_eq!(delays[0], Duration::from_millis(100));
        assert_eq!(delays[1], Duration::from_millis(200));
        assert_eq!(delays[3], Duration::from_millis(800));
        assert_eq!(delays[7], MAX_BACKOFF, "capped at 10 s");
        assert_eq!(delays[9], MAX_BACKOFF);
        assert_eq!(restarts.total, 10);

        let later = start + HEALTHY_AFTER;
        assert_eq!(
            restarts.next_delay(later),
            FIRST_BACKOFF,
            "healthy: backoff starts over"
        );
        assert_eq!(restarts.total, 11, "the shown count never resets");
        assert_eq!(
            restarts.next_delay(later + Duration::from_secs(1)),
            Duration::from_millis(200),
            "a quick second failure doubles again"
        );
    }
}
