//! `[history]`: how long finished intents stay in the database (README
//! "Data model and leases", "Idempotency").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigIssue, FeedConfig};

/// Default `history.retain`: 30 days.
pub const DEFAULT_HISTORY_RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// Default `history.interval`: a minute.
pub const DEFAULT_HISTORY_INTERVAL: Duration = Duration::from_secs(60);

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
    /// again. `0s` keeps every intent forever. At least `feed.retain`
    /// (an intent's feed row leaves with it).
    #[serde(with = "humantime_serde")]
    pub retain: Duration,
    /// Time between retention rounds once a round found nothing more to do
    /// (a round that stops at its bound is followed at once by the next).
    /// Every node starts a round this often; one at a time runs it.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl HistoryConfig {
    /// The issues of this section, `feed` being the `[feed]` it must cover.
    pub(crate) fn validate(&self, feed: &FeedConfig) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if self.interval < Duration::from_secs(1) || self.interval > Duration::from_secs(24 * 3600)
        {
            issues.push(ConfigIssue::new(
                "history.interval",
                "must be between 1s and 24h",
            ));
        }
        if self.retain > MAX_RETAIN {
            issues.push(ConfigIssue::new(
                "history.retain",
                "must be at most 100 years (0s keeps every intent)",
            ));
        } else if !self.retain.is_zero() && (feed.retain.is_zero() || self.retain < feed.retain) {
            issues.push(ConfigIssue::new(
                "history.retain",
                format!(
                    "must be at least feed.retain ({}): an intent's feed row leaves with it, \
                     so a shorter history would cut the feed a client may still page \
                     (0s keeps every intent)",
                    humantime::format_duration(feed.retain)
                ),
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
        }
    }
}
