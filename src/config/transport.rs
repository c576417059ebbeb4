//! Plaintext where a secret travels (README "Security"): refused at start,
//! on reload and by `txmgr config check`, naming the key and the fix, unless
//! that connection says `allow_insecure = true`. Loopback hosts and Unix
//! sockets are always allowed: nothing on a network path can read them.
//!
//! | connection | refused | warned |
//! |---|---|---|
//! | `database.url` to another host | `sslmode` disable, allow, prefer (or unset: sqlx's default is prefer) | `require`, `verify-ca`: encrypted, server not verified |
//! | RPC endpoint (`url`, `ws_url`) | `http://`/`ws://` with user info, a path or a query (where API keys live) | plain without a key: answers can be forged on the path |
//! | remote signer | `http://` with user info or a query | plain without credentials |
//! | KMS `endpoint_url` | — | `http://` |
//! | OTLP collector (`telemetry.otlp_endpoint`) | `http://` while `OTEL_EXPORTER_OTLP_HEADERS` or `…_TRACES_HEADERS` is set, or with a query | plain without them |

use std::net::IpAddr;

use reqwest::Url;

use super::{error::ConfigIssue, Config, SignerSpec, TelemetryConfig};

/// The environment variables whose headers the OTLP exporter sends with
/// every export (the collector's API key, as a rule).
pub(crate) const OTLP_HEADER_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
];

/// What the checks found: `refused` fails the load, `warned` is logged and
/// shown by `config check`.
#[derive(Debug, Default)]
pub(crate) struct TransportFindings {
    /// Plaintext carrying a secret to another host.
    pub(crate) refused: Vec<ConfigIssue>,
    /// Weaker than it should be, but not refused.
    pub(crate) warned: Vec<ConfigIssue>,
}

/// Checks every connection of `config`; `pgsslmode` is the `PGSSLMODE`
/// environment variable, which sqlx reads when the URL has no `sslmode`.
pub(crate) fn check(config: &Config, pgsslmode: Option<&str>) -> TransportFindings {
    let mut found = TransportFindings::default();
    check_database(config, pgsslmode, &mut found);
    for chain in config.chains() {
        let shorthand = chain.config.rpc_urls.is_empty();
        for (i, endpoint) in chain.config.endpoints().iter().enumerate() {
            let key = |field: &str| match (shorthand, field) {
                (true, "url") => chain.key_of("rpc_url"),
                (true, field) => chain.key_of(field),
                (false, field) => chain.key_of(&format!("rpc_urls[{i}].{field}")),
            };
            let allow_key = key("allow_insecure");
            for (field, url) in [
                ("url", Some(&endpoint.url)),
                ("ws_url", endpoint.ws_url.as_ref()),
            ] {
                let Some(url) = url else { continue };
                check_endpoint_url(
                    &key(field),
                    &allow_key,
                    url,
                    endpoint.allow_insecure,
                    &mut found,
                );
            }
        }
    }
    for (address, entry) in &config.submitters {
        let prefix = format!("submitters.{address}.signer");
        match &entry.signer {
            SignerSpec::Remote {
                url,
                allow_insecure,
                ..
            } => check_signer_url(&prefix, url, *allow_insecure, &mut found),
            SignerSpec::AwsKms {
                endpoint_url: Some(url),
                ..
            } => {
                if let Some(plain) = plaintext_to_another_host(url) {
                    found.warned.push(ConfigIssue::new(
                        format!("{prefix}.endpoint_url"),
                        format!("{plain}: KMS requests (signed, but readable and replayable on the path) travel unencrypted; use https://"),
                    ));
                }
            }
            _ => {}
        }
    }
    found
}

/// Checks the OTLP collector's URL; `headers` says whether one of
/// [`OTLP_HEADER_VARIABLES`] is set (the exporter then sends it).
pub(crate) fn check_telemetry(telemetry: &TelemetryConfig, headers: bool) -> TransportFindings {
    let mut found = TransportFindings::default();
    let Some(url) = telemetry.otlp_endpoint.as_deref() else {
        return found;
    };
    let (Some(plain), Ok(parsed)) = (plaintext_to_another_host(url), Url::parse(url)) else {
        return found;
    };
    let key = "telemetry.otlp_endpoint";
    if (headers || parsed.query().is_some()) && !telemetry.allow_insecure {
        found.refused.push(ConfigIssue::new(
            key,
            format!(
                "{plain}: the exporter's headers ({}) or the URL's query would travel unencrypted; use https://, or set telemetry.allow_insecure = true",
                OTLP_HEADER_VARIABLES.join(", ")
            ),
        ));
    } else {
        found.warned.push(ConfigIssue::new(
            key,
            format!("{plain}: plaintext to the trace collector; spans (submitters, transaction ids) can be read on the path, prefer https://"),
        ));
    }
    found
}

/// The host of `url` when it is plaintext (`http`, `ws`) to a host other
/// than loopback, shown as `scheme://host`; `None` otherwise.
fn plaintext_to_another_host(url: &str) -> Option<String> {
    let parsed = Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "ws") {
        return None;
    }
    let host = parsed.host_str()?;
    (!is_loopback(host)).then(|| format!("{}://{host}", parsed.scheme()))
}

/// `localhost` or a loopback IP address (`127.0.0.0/8`, `::1`).
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether the URL carries what is usually a secret: user info, a path
/// beyond `/`, or a query.
fn carries_a_key(url: &Url) -> bool {
    !url.username().is_empty()
        || url.password().is_some()
        || !matches!(url.path(), "" | "/")
        || url.query().is_some()
}

fn check_endpoint_url(
    key: &str,
    allow_key: &str,
    url: &str,
    allowed: bool,
    found: &mut TransportFindings,
) {
    let (Some(plain), Ok(parsed)) = (plaintext_to_another_host(url), Url::parse(url)) else {
        return;
    };
    if carries_a_key(&parsed) && !allowed {
        found.refused.push(ConfigIssue::new(
            key,
            format!(
                "{plain}: the URL's path, query or user info (where providers put API keys) would travel unencrypted; use https:// or wss://, or set {allow_key} = true"
            ),
        ));
    } else {
        found.warned.push(ConfigIssue::new(
            key,
            format!("{plain}: plaintext JSON-RPC to another host; answers can be forged on the path, prefer https:// or wss://"),
        ));
    }
}

fn check_signer_url(prefix: &str, url: &str, allowed: bool, found: &mut TransportFindings) {
    let (Some(plain), Ok(parsed)) = (plaintext_to_another_host(url), Url::parse(url)) else {
        return;
    };
    let credentials =
        !parsed.username().is_empty() || parsed.password().is_some() || parsed.query().is_some();
    let key = format!("{prefix}.url");
    if credentials && !allowed {
        found.refused.push(ConfigIssue::new(
            key,
            format!(
                "{plain}: the signer's credentials would travel unencrypted; use https://, or set {prefix}.allow_insecure = true"
            ),
        ));
    } else {
        found.warned.push(ConfigIssue::new(
            key,
            format!("{plain}: plaintext to the signer; what it is asked to sign can be read and altered on the path, prefer https://"),
        ));
    }
}

/// sslmode values that let a man in the middle read or rewrite the session.
const STRIPPABLE: &[&str] = &["disable", "allow", "prefer"];

fn check_database(config: &Config, pgsslmode: Option<&str>, found: &mut TransportFindings) {
    let Ok(url) = Url::parse(&config.database.url) else {
        return;
    };
    let param = |name: &str| {
        url.query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    // `?host=` overrides the URL's host; a path there is a Unix socket.
    let host = param("host").unwrap_or_else(|| url.host_str().unwrap_or_default().to_owned());
    let socket =
        host.is_empty() || host.starts_with('/') || host.to_ascii_lowercase().starts_with("%2f");
    if socket || is_loopback(&host) {
        return;
    }
    let (mode, from) = match param("sslmode").or_else(|| param("ssl-mode")) {
        Some(mode) => (mode, "sslmode"),
        None => match pgsslmode {
            Some(mode) => (mode.to_owned(), "PGSSLMODE"),
            None => ("prefer".to_owned(), "unset, sqlx's default"),
        },
    };
    let mode = mode.to_ascii_lowercase();
    if STRIPPABLE.contains(&mode.as_str()) {
        if !config.database.allow_insecure {
            found.refused.push(ConfigIssue::new(
                "database.url",
                format!(
                    "{host}: sslmode {mode} ({from}) lets anyone on the path strip TLS and read or rewrite every intent; add ?sslmode=verify-full (with sslrootcert= for a private CA), or set database.allow_insecure = true"
                ),
            ));
        }
    } else if mode != "verify-full" {
        found.warned.push(ConfigIssue::new(
            "database.url",
            format!("{host}: sslmode {mode} encrypts but does not check the server's name; verify-full does"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "[database]\nurl = \"postgres://postgres@127.0.0.1/txmgr\"\n[chain]\nchain_id = 1\nrpc_url = \"http://127.0.0.1:8545\"\n{extra}"
        );
        use figment::providers::Format;
        let figment = figment::Figment::from(figment::providers::Toml::string(&text));
        figment.extract().expect("parses")
    }

    fn refused(config: &Config, pgsslmode: Option<&str>) -> Vec<String> {
        check(config, pgsslmode)
            .refused
            .into_iter()
            .map(|i| i.key)
            .collect()
    }

    #[test]
    fn a_database_on_another_host_needs_sslmode_require_or_stronger() {
        let mut c = config("");
        assert!(refused(&c, None).is_empty(), "loopback");
        for url in [
            "postgres://u:p@db.internal/txmgr",
            "postgres://u:p@10.0.0.5/txmgr?sslmode=prefer",
            "postgres://u:p@db.internal/txmgr?sslmode=disable",
        ] {
            c.database.url = url.into();
            assert_eq!(refused(&c, None), vec!["database.url"], "{url}");
        }
        c.database.url = "postgres://u:p@db.internal/txmgr".into();
        assert!(
            refused(&c, Some("verify-full")).is_empty(),
            "PGSSLMODE counts"
        );
        c.database.url = "postgres://u:p@db.internal/txmgr?sslmode=require".into();
        let found = check(&c, None);
        assert!(found.refused.is_empty());
        assert_eq!(found.warned.len(), 1, "require is warned");
        for url in [
            "postgres://u@db.internal/txmgr?sslmode=verify-full",
            "postgres:///txmgr?host=/var/run/postgresql",
            "postgres://%2Fvar%2Frun%2Fpostgresql/txmgr",
            "postgres://u:p@localhost/txmgr",
            "postgres://u:p@[::1]/txmgr",
        ] {
            c.database.url = url.into();
            assert!(refused(&c, None).is_empty(), "{url}");
        }
        c.database.url = "postgres://u:p@db.internal/txmgr".into();
        c.database.allow_insecure = true;
        assert!(refused(&c, None).is_empty(), "allowed explicitly");
    }

    #[test]
    fn a_plaintext_rpc_url_with_a_key_to_another_host_is_refused() {
        let mut c = config("");
        fn chain(c: &mut Config) -> &mut crate::config::ChainConfig {
            c.chain.as_mut().expect("[chain]")
        }
        chain(&mut c).rpc_url = Some("http://eth.example/v2/KEY".into());
        assert_eq!(refused(&c, None), vec!["chain.rpc_url"]);
        chain(&mut c).rpc_url = Some("http://eth.example/?apikey=K".into());
        assert_eq!(refused(&c, None), vec!["chain.rpc_url"]);
        chain(&mut c).ws_url = Some("ws://eth.example/ws/KEY".into());
        assert_eq!(refused(&c, None), vec!["chain.rpc_url", "chain.ws_url"]);
        chain(&mut c).allow_insecure = true;
        assert!(refused(&c, None).is_empty());
        chain(&mut c).allow_insecure = false;
        chain(&mut c).ws_url = None;
        chain(&mut c).rpc_url = Some("http://10.0.0.5:8545".into());
        let found = check(&c, None);
        assert!(found.refused.is_empty(), "no key: warned only");
        assert_eq!(found.warned.len(), 1);
        chain(&mut c).rpc_url = Some("https://eth.example/v2/KEY".into());
        let found = check(&c, None);
        assert!(found.refused.is_empty() && found.warned.is_empty());
        chain(&mut c).rpc_url = Some("http://127.0.0.1:8545/KEY".into());
        assert!(check(&c, None).refused.is_empty(), "loopback");
    }

    #[test]
    fn a_remote_signer_with_credentials_over_plain_http_is_refused() {
        let signer = |url: &str, allow: bool| {
            format!(
                "[submitters.\"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\"]\nsigner = {{ kind = \"remote\", url = \"{url}\", allow_insecure = {allow} }}\n"
            )
        };
        let key = "submitters.0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266.signer.url";
        let c = config(&signer("http://u:pw@signer.internal:9000", false));
        assert_eq!(refused(&c, None), vec![key]);
        let c = config(&signer("http://u:pw@signer.internal:9000", true));
        assert!(refused(&c, None).is_empty());
        let c = config(&signer("http://signer.internal:9000", false));
        assert!(refused(&c, None).is_empty(), "no credentials: warned");
        let c = config(&signer("https://u:pw@signer.internal:9000", false));
        assert!(refused(&c, None).is_empty());
    }

    #[test]
    fn a_plaintext_collector_is_refused_while_otlp_headers_are_set() {
        let telemetry = |url: &str, allow: bool| TelemetryConfig {
            otlp_endpoint: Some(url.to_owned()),
            allow_insecure: allow,
            ..TelemetryConfig::default()
        };
        let refused = |t: &TelemetryConfig, headers: bool| -> Vec<String> {
            check_telemetry(t, headers)
                .refused
                .into_iter()
                .map(|i| i.key)
                .collect()
        };
        let remote = telemetry("http://collector.example:4318", false);
        assert_eq!(refused(&remote, true), ["telemetry.otlp_endpoint"]);
        let found = check_telemetry(&remote, false);
        assert!(found.refused.is_empty(), "no headers: warned only");
        assert_eq!(found.warned.len(), 1);
        let keyed = telemetry("http://collector.example:4318/?key=K", false);
        assert_eq!(refused(&keyed, false), ["telemetry.otlp_endpoint"]);
        let allowed = telemetry("http://collector.example:4318", true);
        assert!(refused(&allowed, true).is_empty(), "allowed explicitly");
        for url in ["https://collector.example:4318", "http://127.0.0.1:4318"] {
            let found = check_telemetry(&telemetry(url, false), true);
            assert!(found.refused.is_empty() && found.warned.is_empty(), "{url}");
        }
    }

    #[test]
    fn no_message_repeats_a_secret() {
        let mut c = config("");
        c.database.url = "postgres://u:hunter2@db.internal/txmgr".into();
        c.chain.as_mut().expect("[chain]").rpc_url = Some("http://eth.example/v2/SECRETKEY".into());
        let found = check(&c, None);
        for issue in found.refused.iter().chain(&found.warned) {
            assert!(!issue.reason.contains("hunter2"), "{issue:?}");
            assert!(!issue.reason.contains("SECRETKEY"), "{issue:?}");
        }
    }
}
