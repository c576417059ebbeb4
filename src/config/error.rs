//! Configuration errors: every problem is reported as `key: reason`, where the
//! key is the dotted path an operator types into `config.toml` (or the
//! `TXMGR_` variable that set it), so a rejected reload says exactly what to fix.

use std::fmt;

use figment::error::Kind;

/// One problem with one configuration key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, e.g. `lease.renew_interval` or
    /// `submitters.0xf39f….max_in_flight`; `<root>` for the file as a whole.
    pub key: String,
    /// Human-readable explanation, never containing secret values.
    pub reason: String,
}

impl ConfigIssue {
    /// Builds an issue for `key`.
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

/// A configuration that cannot be used. Holds every issue found, so one
/// round of editing can fix them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// All issues, in discovery order; never empty.
    pub issues: Vec<ConfigIssue>,
}

impl ConfigError {
    /// An error with a single issue.
    pub fn single(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            issues: vec![ConfigIssue::new(key, reason)],
        }
    }

    /// Whether any issue names exactly `key`.
    pub fn has_key(&self, key: &str) -> bool {
        self.issues.iter().any(|i| i.key == key)
    }

    /// Converts every error chained in a figment error into issues. Unknown
    /// and missing fields carry their name in the kind, not in the path, so
    /// it is appended to give the full key.
    pub(crate) fn from_figment(err: figment::Error) -> Self {
        let issues = err.into_iter().map(issue_from_figment).collect::<Vec<_>>();
        if issues.is_empty() {
            // A figment error always holds at least itself; keep the
            // "never empty" promise even if that changes.
            return Self::single("<root>", "invalid configuration");
        }
        Self { issues }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

fn issue_from_figment(err: figment::Error) -> ConfigIssue {
    let mut path = err.path.clone();
    let reason = match &err.kind {
        Kind::UnknownField(field, expected) => {
            push_unless_last(&mut path, field);
            if expected.is_empty() {
                "unknown key".to_string()
            } else {
                format!("unknown key, expected one of: {}", expected.join(", "))
            }
        }
        Kind::MissingField(field) => {
            push_unless_last(&mut path, field);
            "required key is missing".to_string()
        }
        Kind::DuplicateField(field) => {
            push_unless_last(&mut path, field);
            "key given more than once".to_string()
        }
        other => one_line(&other.to_string()),
    };
    let key = if path.is_empty() {
        "<root>".to_string()
    } else {
        path.join(".")
    };
    let reason = match source_note(&err) {
        Some(note) => format!("{reason} ({note})"),
        None => reason,
    };
    ConfigIssue { key, reason }
}

/// TOML syntax errors draw the offending line over several lines; keep
/// the words so the output stays one issue per line.
fn one_line(reason: &str) -> String {
    if !reason.contains('\n') {
        return reason.to_string();
    }
    reason
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains('|'))
        .collect::<Vec<_>>()
        .join("; ")
}

/// figment already ends the path with the field for some kinds; append it
/// only where it is missing.
fn push_unless_last(path: &mut Vec<String>, field: &str) {
    if path.last().map(String::as_str) != Some(field) {
        path.push(field.to_string());
    }
}

/// Names the environment variable that supplied a bad value, since the
/// operator will not find it in the file.
fn source_note(err: &figment::Error) -> Option<String> {
    let md = err.metadata.as_ref()?;
    if md.name != super::env::ENV_METADATA_NAME {
        return None;
    }
    let profile = err.profile.clone().unwrap_or_default();
    let keys: Vec<&str> = err.path.iter().map(String::as_str).collect();
    if keys.is_empty() {
        return Some(format!("set by {}", md.name));
    }
    Some(format!(
        "set by environment variable {}",
        md.interpolate(&profile, &keys)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_prints_one_issue_per_line() {
        let err = ConfigError {
            issues: vec![
                ConfigIssue::new("lease.duration", "bad"),
                ConfigIssue::new("a.b", "c"),
            ],
        };
        assert_eq!(err.to_string(), "lease.duration: bad\na.b: c");
    }
}
