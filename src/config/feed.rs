//! `[feed]`: how long the completion feed keeps its rows, and the audit
//! table its (README "Completion feed" and "Operations").

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default `feed.retain`: 30 days.
pub const DEFAULT_FEED_RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// Default `feed.audit_retain`: 90 days (an audit trail outlives the feed).
pub const DEFAULT_AUDIT_RETAIN: Duration = Duration::from_secs(90 * 24 * 3600);

/// The `[feed]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeedConfig {
    /// Completion rows older than this are deleted (in bounded batches) once
    /// every webhook delivering in that time has its cursor past them and no
    /// dead letter refers to them. `0s` keeps them forever. A client paging
    /// `GET /v1/completions` must not fall further behind than this.
    #[serde(with = "humantime_serde")]
    pub retain: Duration,
    /// `ops_audit` rows (who did what, why) older than this are deleted in
    /// bounded batches, except those of an intent still open; `0s` keeps
    /// them forever. Every client cancel or re-broadcast writes one, so the
    /// table must not grow without end.
    #[serde(with = "humantime_serde")]
    pub audit_retain: Duration,
}

/// Longest `feed.retain` accepted (100 years): beyond it the database's
/// interval arithmetic would overflow.
const MAX_RETAIN: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl FeedConfig {
    /// The issues of this section.
    pub(crate) fn validate(&self) -> Vec<super::ConfigIssue> {
        [
            ("feed.retain", self.retain),
            ("feed.audit_retain", self.audit_retain),
        ]
        .into_iter()
        .filter(|(_, retain)| *retain > MAX_RETAIN)
        .map(|(key, _)| {
            super::ConfigIssue::new(key, "must be at most 100 years (0s keeps every row)")
        })
        .collect()
    }
}

impl Default for FeedConfig {
    fn default() -> Self {
        Self {
            retain: DEFAULT_FEED_RETAIN,
            audit_retain: DEFAULT_AUDIT_RETAIN,
        }
    }
}
