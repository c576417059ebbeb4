//! One webhook's settings (`[[webhooks]]`), as the daemon resolved them: the
//! secret is read from its environment variable before they get here.

use std::{collections::BTreeSet, fmt, time::Duration};

use crate::domain::FeedEvent;

/// A webhook name as the `webhook_cursor` table takes it: 1 to 64
/// characters of `[A-Za-z0-9_.-]`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The signing secret; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// Wraps the secret's value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The key bytes for the HMAC.
    pub fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

/// What one webhook receives and how its deliveries are retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// Unique name: names the lease, the cursor and the metrics.
    pub name: String,
    /// Where events are POSTed (`http` or `https`).
    pub url: String,
    /// Signs every request.
    pub secret: WebhookSecret,
    /// The events delivered; others are passed over.
    pub events: BTreeSet<FeedEvent>,
    /// Only these submitters' events (lower-case `0x` hex), when set.
    pub submitters: Option<BTreeSet<String>>,
    /// Only these chains' events (chain ids), when set.
    pub chains: Option<BTreeSet<u64>>,
    /// Attempts per event before it is dead-lettered (at least 1).
    pub max_attempts: u32,
    /// Delay before the first retry; doubles per retry (with jitter).
    pub backoff_initial: Duration,
    /// Longest delay between retries (a `Retry-After` may ask for more, up to an hour).
    pub backoff_max: Duration,
    /// Time allowed for one request, connection included.
    pub timeout: Duration,
    /// Submitters whose events are delivered at the same time (each
    /// submitter's events stay one at a time, in order).
    pub concurrency: usize,
    /// A private CA trusted for an `https://` receiver, besides the public roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// A webhook seen for the first time starts at the end of the feed
    /// (true) or replays it from the beginning (false).
    pub start_at_end: bool,
}

impl WebhookSettings {
    /// True when this webhook wants the event of `submitter` on `chain_id`.
    pub fn wants(&self, event: FeedEvent, chain_id: u64, submitter: &str) -> bool {
        self.events.contains(&event)
            && self
                .submitters
                .as_ref()
                .is_none_or(|only| only.contains(submitter))
            && self
                .chains
                .as_ref()
                .is_none_or(|only| only.contains(&chain_id))
    }
}
