//! `[[webhooks]]`: where completion-feed events are pushed (README "Webhooks").
//! The signing secret is named here — by the file holding it (`secret_file`,
//! read again on every reload, so it can be rotated) or by its environment
//! variable (`secret_env`, fixed for the life of the process) — and never
//! stored in the configuration.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};
use txmgr_actors::{
    domain::FeedEvent,
    webhook::{is_valid_name, WebhookSecret, WebhookSettings},
};

use super::{error::ConfigIssue, url::check_url, validate::check_address};

/// One webhook as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Unique name, 1–64 characters of `[A-Za-z0-9_.-]`: names its lease,
    /// cursor, dead letters and metrics. Renaming starts a new cursor.
    pub name: String,
    /// Receiver URL, `https://` or `http://`.
    pub url: String,
    /// Environment variable holding the signing secret (read at start; the
    /// environment of a running process does not change, so rotating it
    /// needs a restart). Exactly one of `secret_env` and `secret_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// File holding the signing secret (surrounding white space ignored),
    /// read again on every reload: write the new secret, then SIGHUP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// Events delivered; default all of them.
    #[serde(default = "all_events")]
    pub events: Vec<FeedEvent>,
    /// Only these submitters' events, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitters: Option<Vec<String>>,
    /// Only these chains' events (names or ids; normalised on load to ids),
    /// when set. One cursor covers every chain either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chains: Option<Vec<String>>,
    /// Attempts per event before it is dead-lettered.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Delay before the first retry; doubles per retry, with jitter.
    #[serde(default = "default_backoff_initial", with = "humantime_serde")]
    pub backoff_initial: Duration,
    /// Longest delay between retries (a receiver's `Retry-After` may ask for more).
    #[serde(default = "default_backoff_max", with = "humantime_serde")]
    pub backoff_max: Duration,
    /// Time allowed for one request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Submitters delivered to at the same time (each submitter's events stay in order).
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// A private CA (PEM) trusted for an `https://` receiver, besides the public roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Where a new webhook starts in the feed: `end` (events from now on,
    /// the default) or `beginning` (replay every retained event). Only the
    /// first start counts: afterwards the webhook resumes from its cursor.
    #[serde(default)]
    pub start_at: StartAt,
}

/// `start_at` of a webhook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartAt {
    /// Events committed from the webhook's first start on.
    #[default]
    End,
    /// Every event in the feed.
    Beginning,
}

fn all_events() -> Vec<FeedEvent> {
    FeedEvent::ALL.to_vec()
}
fn default_max_attempts() -> u32 {
    10
}
fn default_backoff_initial() -> Duration {
    Duration::from_secs(1)
}
fn default_backoff_max() -> Duration {
    Duration::from_secs(300)
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_concurrency() -> usize {
    16
}

/// Largest `concurrency`.
const MAX_CONCURRENCY: usize = 256;

/// Checks every webhook (and that names are unique), lower-casing the
/// submitter filters.
pub(crate) fn validate_webhooks(webhooks: &mut [WebhookConfig]) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut names = BTreeSet::new();
    for (i, hook) in webhooks.iter_mut().enumerate() {
        let key = |field: &str| format!("webhooks[{i}].{field}");
        if !is_valid_name(&hook.name) {
            issues.push(ConfigIssue::new(
                key("name"),
                format!(
                    "invalid webhook name {:?}: expected 1 to 64 characters of [A-Za-z0-9_.-]",
                    hook.name
                ),
            ));
        } else if !names.insert(hook.name.clone()) {
            issues.push(ConfigIssue::new(
                key("name"),
                format!("duplicate webhook name {:?}", hook.name),
            ));
        }
        if let Err(reason) = check_url(&hook.url, &["https", "http"]) {
            issues.push(ConfigIssue::new(key("url"), reason));
        }
        match (&hook.secret_env, &hook.secret_file) {
            (Some(_), Some(_)) => issues.push(ConfigIssue::new(
                key("secret_file"),
                "give either secret_env or secret_file, not both",
            )),
            (None, None) => issues.push(ConfigIssue::new(
                key("secret_file"),
                "name where the signing secret is: secret_file (rotatable by reload) or secret_env",
            )),
            (Some(var), None) if var.trim().is_empty() => issues.push(ConfigIssue::new(
                key("secret_env"),
                "name the environment variable that holds the signing secret",
            )),
            _ => {}
        }
        if hook.events.is_empty() {
            issues.push(ConfigIssue::new(
                key("events"),
                "no events: list at least one, or leave the key out for all",
            ));
        }
        if let Some(only) = &mut hook.submitters {
            for address in only.iter_mut() {
                match check_address(address) {
                    Ok(lower) => *address = lower,
                    Err(reason) => issues.push(ConfigIssue::new(key("submitters"), reason)),
                }
            }
        }
        if hook.max_attempts == 0 {
            issues.push(ConfigIssue::new(key("max_attempts"), "must be at least 1"));
        }
        if hook.backoff_initial.is_zero() {
            issues.push(ConfigIssue::new(
                key("backoff_initial"),
                "must be above zero",
            ));
        }
        if hook.backoff_max < hook.backoff_initial {
            issues.push(ConfigIssue::new(
                key("backoff_max"),
                "must be at least backoff_initial",
            ));
        }
        if hook.timeout.is_zero() {
            issues.push(ConfigIssue::new(key("timeout"), "must be above zero"));
        }
        if !(1..=MAX_CONCURRENCY).contains(&hook.concurrency) {
            issues.push(ConfigIssue::new(
                key("concurrency"),
                format!("must be between 1 and {MAX_CONCURRENCY}"),
            ));
        }
    }
    issues
}

/// A webhook's signing secret, from its file or its variable; the error
/// names the key and why (never the secret).
fn read_secret(
    hook: &WebhookConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<String, (&'static str, String)> {
    if let Some(path) = &hook.secret_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            (
                "secret_file",
                format!(
                    "{} cannot be read ({e}): webhook {:?} cannot sign",
                    path.display(),
                    hook.name
                ),
            )
        })?;
        let secret = text.trim();
        if secret.is_empty() {
            return Err((
                "secret_file",
                format!(
                    "{} is empty: webhook {:?} cannot sign",
                    path.display(),
                    hook.name
                ),
            ));
        }
        return Ok(secret.to_owned());
    }
    let var = hook.secret_env.as_deref().unwrap_or_default();
    match env(var) {
        Some(secret) if !secret.is_empty() => Ok(secret),
        _ => Err((
            "secret_env",
            format!(
                "environment variable {var} is not set (or empty): webhook {:?} cannot sign",
                hook.name
            ),
        )),
    }
}

/// The engine's settings of every webhook, reading each secret from its
/// file or from `env`.
/// A missing or empty variable is an issue naming the webhook and variable.
pub fn resolve_webhooks(
    webhooks: &[WebhookConfig],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<WebhookSettings>, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    let mut resolved = Vec::new();
    for (i, hook) in webhooks.iter().enumerate() {
        if let Err(err) = txmgr_actors::tls::client_config(hook.ca_file.as_deref()) {
            issues.push(ConfigIssue::new(
                format!("webhooks[{i}].ca_file"),
                err.to_string(),
            ));
            continue;
        }
        let secret = match read_secret(hook, &env) {
            Ok(secret) => secret,
            Err((field, reason)) => {
                issues.push(ConfigIssue::new(format!("webhooks[{i}].{field}"), reason));
                continue;
            }
        };
        resolved.push(WebhookSettings {
            name: hook.name.clone(),
            url: hook.url.clone(),
            secret: WebhookSecret::new(secret),
            events: hook.events.iter().copied().collect(),
            submitters: hook
                .submitters
                .as_ref()
                .map(|only| only.iter().cloned().collect()),
            chains: hook
                .chains
                .as_ref()
                .map(|only| only.iter().filter_map(|id| id.parse().ok()).collect()),
            max_attempts: hook.max_attempts,
            backoff_initial: hook.backoff_initial,
            backoff_max: hook.backoff_max,
            timeout: hook.timeout,
            concurrency: hook.concurrency,
            ca_file: hook.ca_file.clone(),
            start_at_end: hook.start_at == StartAt::End,
        });
    }
    if issues.is_empty() {
        Ok(resolved)
    } else {
        Err(issues)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(name: &str) -> WebhookConfig {
        toml::from_str(&format!(
            "name = \"{name}\"\nurl = \"https://example.com/hook\"\nsecret_env = \"HOOK_SECRET\""
        ))
        .expect("parses")
    }

    #[test]
    fn defaults_deliver_every_event_and_retry_ten_times() {
        let hook = hook("ops");
        assert_eq!(hook.events, FeedEvent::ALL.to_vec());
        assert_eq!(hook.max_attempts, 10);
        assert!(validate_webhooks(&mut [hook]).is_empty());
    }

    #[test]
    fn each_bad_key_is_named() {
        let mut bad = hook("bad name");
        bad.url = "ftp://x".into();
        bad.max_attempts = 0;
        bad.concurrency = 0;
        bad.submitters = Some(vec!["0x12".into()]);
        let mut hooks = [bad, hook("ops"), hook("ops")];
        let keys: Vec<String> = validate_webhooks(&mut hooks)
            .into_iter()
            .map(|i| i.key)
            .collect();
        for expected in [
            "webhooks[0].name",
            "webhooks[0].url",
            "webhooks[0].max_attempts",
            "webhooks[0].concurrency",
            "webhooks[0].submitters",
            "webhooks[2].name",
        ] {
            assert!(
                keys.contains(&expected.to_string()),
                "{expected} in {keys:?}"
            );
        }
    }

    #[test]
    fn unknown_events_are_refused_by_name() {
        let err = toml::from_str::<WebhookConfig>(
            "name = \"x\"\nurl = \"http://a\"\nsecret_env = \"S\"\nevents = [\"MINED\"]",
        )
        .expect_err("unknown event");
        assert!(err.to_string().contains("MINED"), "{err}");
    }

    #[test]
    fn a_missing_secret_names_the_variable() {
        let issues = resolve_webhooks(&[hook("ops")], |_| None).expect_err("no secret");
        assert_eq!(issues[0].key, "webhooks[0].secret_env");
        assert!(issues[0].reason.contains("HOOK_SECRET"));
        let ok = resolve_webhooks(&[hook("ops")], |_| Some("s3cret".into())).expect("resolved");
        assert_eq!(ok[0].secret, WebhookSecret::new("s3cret"));
    }

    #[test]
    fn the_secret_comes_from_exactly_one_of_a_file_and_a_variable() {
        let dir = std::env::temp_dir().join(format!("txmgr-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("hook.secret");
        std::fs::write(&file, "rotated-secret\n").expect("secret file");
        let mut from_file = hook("ops");
        from_file.secret_env = None;
        from_file.secret_file = Some(file.clone());
        assert!(validate_webhooks(&mut [from_file.clone()]).is_empty());
        let ok = resolve_webhooks(&[from_file.clone()], |_| None).expect("read from the file");
        assert_eq!(ok[0].secret, WebhookSecret::new("rotated-secret"));

        let mut both = from_file.clone();
        both.secret_env = Some("HOOK_SECRET".into());
        assert_eq!(
            validate_webhooks(&mut [both])[0].key,
            "webhooks[0].secret_file"
        );
        let mut neither = from_file.clone();
        neither.secret_file = None;
        assert_eq!(
            validate_webhooks(&mut [neither])[0].key,
            "webhooks[0].secret_file"
        );

        std::fs::write(&file, "  \n").expect("empty secret");
        let issues = resolve_webhooks(&[from_file.clone()], |_| None).expect_err("empty");
        assert_eq!(issues[0].key, "webhooks[0].secret_file");
        assert!(!issues[0].reason.contains("rotated"), "{:?}", issues[0]);
        std::fs::remove_file(&file).expect("remove");
        let issues = resolve_webhooks(&[from_file], |_| None).expect_err("missing");
        assert_eq!(issues[0].key, "webhooks[0].secret_file");
        let _ = std::fs::remove_dir(&dir);
    }
}
