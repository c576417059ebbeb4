//! Checks of a submitter's `signer` table (README "Configuration"). The
//! table is [`SignerSpec`], the engine's own description of a signer — one
//! type, read from the file and built by `build_signer`; the configuration
//! holds only names of environment variables, file paths and endpoints,
//! never key material.

use txmgr_actors::signer::Pkcs11Spec;
pub use txmgr_actors::signer::SignerSpec;

use super::{error::ConfigIssue, url, validate::check_address};

/// Checks `signer` for the submitter `address` (lower-case); `prefix` is
/// the dotted key of the signer table.
pub(crate) fn validate(signer: &SignerSpec, prefix: &str, address: &str) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    match signer {
        SignerSpec::Env { env, key_file } => match (env, key_file) {
            (Some(env), None) => check_env_name(&format!("{prefix}.env"), env, &mut issues),
            (None, Some(path)) => {
                if !path.is_file() {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.key_file"),
                        format!("{} is not a readable file", path.display()),
                    ));
                }
            }
            (Some(_), Some(_)) => issues.push(ConfigIssue::new(
                format!("{prefix}.key_file"),
                "give either env or key_file, not both",
            )),
            (None, None) => issues.push(ConfigIssue::new(
                format!("{prefix}.env"),
                "name the key's environment variable (env) or its file (key_file)",
            )),
        },
        SignerSpec::Keystore { path, password_env } => {
            if path.as_os_str().is_empty() {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.path"),
                    "must not be empty",
                ));
            }
            check_env_name(&format!("{prefix}.password_env"), password_env, &mut issues);
        }
        SignerSpec::Remote {
            url,
            address: signer_address,
            ca_file,
            ..
        } => {
            if let Err(reason) = url::check_url(url, &["http", "https"]) {
                issues.push(ConfigIssue::new(format!("{prefix}.url"), reason));
            }
            if let Some(path) = ca_file {
                if !path.is_file() {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.ca_file"),
                        format!("{} is not a readable file", path.display()),
                    ));
                }
            }
            if let Some(given) = signer_address {
                check_signer_address(prefix, given, address, &mut issues);
            }
        }
        SignerSpec::AwsKms {
            key_id,
            region,
            endpoint_url,
            ca_file,
            max_concurrency,
        } => {
            if let Some(path) = ca_file {
                if !path.is_file() {
                    issues.push(ConfigIssue::new(
                        format!("{prefix}.ca_file"),
                        format!("{} is not a readable file", path.display()),
                    ));
                }
            }
            if key_id.trim().is_empty() {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.key_id"),
                    "must name the KMS key (id, ARN or alias/…)",
                ));
            }
            let region_ok = !region.is_empty()
                && region
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !region_ok {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.region"),
                    "must be an AWS region such as \"eu-west-1\"",
                ));
            }
            if let Some(url) = endpoint_url {
                if let Err(reason) = url::check_url(url, &["http", "https"]) {
                    issues.push(ConfigIssue::new(format!("{prefix}.endpoint_url"), reason));
                }
            }
            if !(1..=256).contains(max_concurrency) {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.max_concurrency"),
                    "must be between 1 and 256",
                ));
            }
        }
        SignerSpec::Pkcs11(spec) => validate_pkcs11(prefix, spec, &mut issues),
    }
    issues
}

/// Checks a `pkcs11` signer: the module is a file, the token and the key
/// are named, the PIN comes from exactly one place (never the file itself).
fn validate_pkcs11(prefix: &str, spec: &Pkcs11Spec, issues: &mut Vec<ConfigIssue>) {
    if !spec.module.is_file() {
        issues.push(ConfigIssue::new(
            format!("{prefix}.module"),
            format!(
                "{} is not a readable file (the vendor's PKCS#11 library)",
                spec.module.display()
            ),
        ));
    }
    if spec.token_label.trim().is_empty() {
        issues.push(ConfigIssue::new(
            format!("{prefix}.token_label"),
            "must name the token (`pkcs11-tool --list-slots` shows the labels)",
        ));
    }
    if spec.key_label.is_none() && spec.key_id.is_none() {
        issues.push(ConfigIssue::new(
            format!("{prefix}.key_label"),
            "name the key by key_label or key_id (`pkcs11-tool --list-objects --login`)",
        ));
    }
    if let Some(id) = &spec.key_id {
        let hex = id.trim();
        if hex.is_empty() || hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            issues.push(ConfigIssue::new(
                format!("{prefix}.key_id"),
                "must be the key's CKA_ID in hex, e.g. \"01\"",
            ));
        }
    }
    match (&spec.pin_file, &spec.pin_env) {
        (Some(path), None) => {
            if !path.is_file() {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.pin_file"),
                    format!("{} is not a readable file", path.display()),
                ));
            }
        }
        (None, Some(env)) => check_env_name(&format!("{prefix}.pin_env"), env, issues),
        (Some(_), Some(_)) => issues.push(ConfigIssue::new(
            format!("{prefix}.pin_file"),
            "give either pin_file or pin_env, not both",
        )),
        (None, None) => issues.push(ConfigIssue::new(
            format!("{prefix}.pin_file"),
            "name the user PIN's file (pin_file) or variable (pin_env)",
        )),
    }
    if !(1..=256).contains(&spec.max_sessions) {
        issues.push(ConfigIssue::new(
            format!("{prefix}.max_sessions"),
            "must be between 1 and 256",
        ));
    }
}

/// Checks what `pkcs11` signers share: one module has one session pool, so
/// every signer naming it gives the same `max_sessions`; one token has one
/// login per process, so every signer on it names the same PIN (a second
/// PIN would never be tried). Each disagreement is reported at the later
/// submitter, naming the earlier one.
pub(crate) fn check_shared_pkcs11<'a>(
    signers: impl IntoIterator<Item = (&'a str, &'a SignerSpec)>,
) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut modules: Vec<(&str, &Pkcs11Spec)> = Vec::new();
    for (address, signer) in signers {
        let SignerSpec::Pkcs11(spec) = signer else {
            continue;
        };
        let prefix = format!("submitters.{address}.signer");
        if let Some((first, seen)) = modules.iter().find(|(_, s)| s.module == spec.module) {
            if seen.max_sessions != spec.max_sessions {
                issues.push(ConfigIssue::new(
                    format!("{prefix}.max_sessions"),
                    format!(
                        "is {} but submitter {first} gives {} for the same module: one module has \
                         one pool of sessions, give every signer on it the same max_sessions",
                        spec.max_sessions, seen.max_sessions
                    ),
                ));
            }
        }
        if let Some((first, _)) = modules.iter().find(|(_, s)| {
            s.module == spec.module
                && s.token_label == spec.token_label
                && (s.pin_file != spec.pin_file || s.pin_env != spec.pin_env)
        }) {
            issues.push(ConfigIssue::new(
                format!("{prefix}.pin_file"),
                format!(
                    "names another PIN than submitter {first} on the same token {:?}: a token has \
                     one login per process, give every signer on it the same pin_file or pin_env",
                    spec.token_label
                ),
            ));
        }
        modules.push((address, spec));
    }
    issues
}

/// Lower-cases the optional remote signer address.
pub(crate) fn normalise(signer: &mut SignerSpec) {
    if let SignerSpec::Remote {
        address: Some(a), ..
    } = signer
    {
        a.make_ascii_lowercase();
    }
}

/// The `address` of a remote signer must be the submitter's.
fn check_signer_address(prefix: &str, given: &str, address: &str, issues: &mut Vec<ConfigIssue>) {
    let key = format!("{prefix}.address");
    match check_address(given) {
        Err(reason) => issues.push(ConfigIssue::new(key, reason)),
        Ok(normalised) if normalised != address => issues.push(ConfigIssue::new(
            key,
            format!("{normalised} differs from the submitter address {address}"),
        )),
        Ok(_) => {}
    }
}

/// Environment variable names: letters, digits and `_`, not starting with a
/// digit, so a typo such as a pasted key is caught before start.
fn check_env_name(key: &str, name: &str, issues: &mut Vec<ConfigIssue>) {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        // Do not echo the value: a private key pasted here must not be logged.
        issues.push(ConfigIssue::new(
            key,
            "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), not a value",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact_remote_credentials() {
        let s = SignerSpec::remote("https://u:topsecret@signer:9000", None);
        assert!(!format!("{s:?}").contains("topsecret"));
        assert!(!s.to_string().contains("topsecret"));
    }

    #[test]
    fn a_pkcs11_signer_needs_its_module_token_key_and_one_pin_source() {
        let parse = |table: &str| -> SignerSpec {
            toml::from_str(&format!("kind = \"pkcs11\"\n{table}")).expect("parses")
        };
        let keys = |spec: &SignerSpec| -> Vec<String> {
            validate(spec, "s", "0x1")
                .into_iter()
                .map(|issue| issue.key)
                .collect()
        };
        let nothing = parse("module = \"/nonexistent/lib.so\"\ntoken_label = \" \"");
        assert_eq!(
            keys(&nothing),
            ["s.module", "s.token_label", "s.key_label", "s.pin_file"]
        );
        let both = parse(
            "module = \"/nonexistent/lib.so\"\ntoken_label = \"hot\"\nkey_id = \"0g\"\n\
             pin_file = \"/nonexistent/pin\"\npin_env = \"PIN\"\nmax_sessions = 0",
        );
        assert_eq!(
            keys(&both),
            ["s.module", "s.key_id", "s.pin_file", "s.max_sessions"]
        );
        let by_env = parse(
            "module = \"/nonexistent/lib.so\"\ntoken_label = \"hot\"\nkey_label = \"k\"\npin_env = \"1234\"",
        );
        let issues = validate(&by_env, "s", "0x1");
        let pin = issues
            .iter()
            .find(|i| i.key == "s.pin_env")
            .expect("a PIN is not a name");
        assert!(!pin.reason.contains("1234"), "{}", pin.reason);
        assert_eq!(by_env.kind(), "pkcs11");
        assert_eq!(by_env.to_string(), "pkcs11:hot:k");
    }

    #[test]
    fn signers_on_one_module_share_its_session_bound_and_a_token_its_pin() {
        let parse = |table: &str| -> SignerSpec {
            toml::from_str(&format!(
                "kind = \"pkcs11\"\nmodule = \"/m.so\"\nkey_label = \"k\"\n{table}"
            ))
            .expect("parses")
        };
        let a = parse("token_label = \"hot\"\npin_file = \"/pin\"");
        let same = parse("token_label = \"hot\"\npin_file = \"/pin\"\nmax_sessions = 4");
        let other_bound = parse("token_label = \"cold\"\npin_env = \"P\"\nmax_sessions = 2");
        let other_pin = parse("token_label = \"hot\"\npin_env = \"P\"");
        let issues = check_shared_pkcs11([
            ("0xa", &a),
            ("0xb", &same),
            ("0xc", &other_bound),
            ("0xd", &other_pin),
        ]);
        let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "submitters.0xc.signer.max_sessions",
                "submitters.0xd.signer.pin_file"
            ]
        );
        assert!(issues[0].reason.contains("0xa"), "{}", issues[0].reason);
        let unknown: Result<SignerSpec, _> = toml::from_str(
            "kind = \"pkcs11\"\nmodule = \"/m.so\"\ntoken_label = \"t\"\npin = \"1234\"",
        );
        assert!(unknown.is_err(), "an unknown key (a PIN inline) is refused");
    }

    #[test]
    fn env_name_that_looks_like_a_key_is_rejected_without_echo() {
        let key = "0x".to_string() + &"ab".repeat(32);
        let s = SignerSpec::env(key.clone());
        let issues = validate(&s, "submitters.0x1.signer", "0x1");
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].key, "submitters.0x1.signer.env");
        assert!(!issues[0].reason.contains(&key));
    }
}
