//! `[history]`: how long finished intents stay in the database (README
//! "Data model and leases", "Idempotency").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigIssue, FeedConfig};

/// Default `history.retain`: 30 days.
pub const DEFAULT_HISTORY_RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// Default `history.interval`: a minute.
pub const DEFAULT_HISTORY_INTERVAL: Duration = Duration::from_secs(60);

/// Default `history.delete_rate`: intents removed per second at most while
/// retention catches up (86 million a day, ten times a steady 100/s).
pub const DEFAULT_HISTORY_DELETE_RATE: u32 = 1_000;

/// Largest `history.delete_rate` accepted.
const MAX_DELETE_RATE: u32 = 1_000_000;

/// Longest `history.retain` accepted (100 years): beyond it the database's
/// interval arithmetic would overflow.
const MAX_RETAIN: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The `[history]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Final intents (CONFIRMED, FAILED_FINAL, CANCELLED, REJECTED) created
    /// and last changed longer ago than this are deleted, with their
    /// attempts, feed rows, dead letters and top-up records, in bounded
    /// batches by one node at a time; their `request_id` may then be used
    /// again. `0s` keeps every intent forever. A value shorter than
    /// `feed.retain` counts as `feed.retain`, and `feed.retain = 0s` keeps
    /// every intent too (an intent's feed row leaves with it): see
    /// [`HistoryConfig::effective_retain`].
    #[serde(with = "humantime_serde")]
    pub retain: Duration,
    /// Time between retention rounds once a round found nothing more to do
    /// (a round that stops at its bound is followed sooner: see
    /// `delete_rate`).
    /// Every node starts a round this often; one at a time runs it.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Intents removed per second at most while retention is behind (a
    /// backlog after retention is switched on over months of history, or
    /// after the nodes were down): the rounds pause to keep to it, so the
    /// deletes' write-ahead log never crowds out the engine's commits.
    pub delete_rate: u32,
}

impl HistoryConfig {
    /// The retention that applies: `retain`, but never shorter than
    /// `feed.retain` (an intent's feed row leaves with it, and the feed
    /// keeps its rows that long), and zero (every intent kept) when the
    /// feed keeps its rows forever.
    pub fn effective_retain(&self, feed: &FeedConfig) -> Duration {
        if self.retain.is_zero() || feed.retain.is_zero() {
            Duration::ZERO
        } else {
            self.retain.max(feed.retain)
        }
    }

    /// What deserves a warning: a `retain` that `feed.retain` overrides.
    pub(crate) fn warnings(&self, feed: &FeedConfig) -> Vec<ConfigIssue> {
        let effective = self.effective_retain(feed);
        if effective == self.retain {
            return Vec::new();
        }
        let why = if effective.is_zero() {
            "feed.retain = 0s keeps every feed row, and an intent's feed row leaves with it: \
             every intent is kept"
                .to_owned()
        } else {
            format!(
                "shorter than feed.retain ({}), which applies instead: an intent's feed row \
                 leaves with it",
                humantime::format_duration(feed.retain)
            )
        };
        vec![ConfigIssue::new("history.retain", why)]
    }

    /// The issues of this section.
    pub(crate) fn validate(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if self.interval < Duration::from_secs(1) || self.interval > Duration::from_secs(24 * 3600)
        {
            issues.push(ConfigIssue::new(
                "history.interval",
                "must be between 1s and 24h",
            ));
        }
        if self.delete_rate == 0 || self.delete_rate > MAX_DELETE_RATE {
            issues.push(ConfigIssue::new(
                "history.delete_rate",
                format!("must be between 1 and {MAX_DELETE_RATE} intents per second"),
            ));
        }
        if self.retain > MAX_RETAIN {
            issues.push(ConfigIssue::new(
                "history.retain",
                "must be at most 100 years (0s keeps every intent)",
            ));
        }
        issues
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self {
            retain: DEFAULT_HISTORY_RETAIN,
            interval: DEFAULT_HISTORY_INTERVAL,
            delete_rate: DEFAULT_HISTORY_DELETE_RATE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn feed(retain: Duration) -> FeedConfig {
        FeedConfig {
            retain,
            ..FeedConfig::default()
        }
    }

    #[test]
    fn the_feed_bounds_the_retention_from_below_and_keeping_it_forever_keeps_every_intent() {
        let history = |retain| HistoryConfig {
            retain,
            ..HistoryConfig::default()
        };
        assert_eq!(
            history(40 * DAY).effective_retain(&feed(30 * DAY)),
            40 * DAY
        );
        assert!(history(40 * DAY).warnings(&feed(30 * DAY)).is_empty());
        assert_eq!(history(7 * DAY).effective_retain(&feed(30 * DAY)), 30 * DAY);
        assert_eq!(history(7 * DAY).warnings(&feed(30 * DAY)).len(), 1);
        assert_eq!(
            history(7 * DAY).effective_retain(&feed(Duration::ZERO)),
            Duration::ZERO
        );
        assert_eq!(
            history(Duration::ZERO).effective_retain(&feed(30 * DAY)),
            Duration::ZERO
        );
        assert!(history(Duration::ZERO)
            .warnings(&feed(Duration::ZERO))
            .is_empty());
        assert_eq!(
            HistoryConfig {
                interval: Duration::from_millis(10),
                ..HistoryConfig::default()
            }
            .validate()
            .len(),
            1
        );
        for (rate, issues) in [(0, 1), (1, 0), (1_000_000, 0), (1_000_001, 1)] {
            let config = HistoryConfig {
                delete_rate: rate,
                ..HistoryConfig::default()
            };
            assert_eq!(config.validate().len(), issues, "delete_rate {rate}");
        }
    }
}
