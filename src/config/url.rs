//! Minimal URL checks and password redaction. Only the scheme and the
//! `user:password@` part matter here, so a full URL parser is not needed.

/// Replaces the password of `scheme://user:password@host/...`, and the value
/// of a `password` or `sslpassword` query parameter (libpq and sqlx accept
/// both), with `***`; URLs without a password are returned unchanged.
pub fn redact_password(url: &str) -> String {
    let url = redact_userinfo_password(url);
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let query = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_password_param(key) => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&");
    match fragment {
        Some(fragment) => format!("{base}?{query}#{fragment}"),
        None => format!("{base}?{query}"),
    }
}

/// Query parameters whose value is a password.
fn is_password_param(key: &str) -> bool {
    matches!(
        key.to_ascii_lowercase().as_str(),
        "password" | "sslpassword" | "ssl-password"
    )
}

fn redact_userinfo_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else {
        return url.to_string();
    };
    format!(
        "{}{}:***{}",
        &url[..authority_start],
        &userinfo[..colon],
        &url[authority_start + at..]
    )
}

/// `scheme://host[:port]` of a URL: all of an RPC or signer URL that may be
/// shown (its path, query and user info may carry API keys).
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<invalid URL>".to_owned();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    format!("{scheme}://{host}")
}

/// Checks that `url` uses one of `schemes` and names a host; returns the
/// reason when it does not. The reason never repeats the URL, which may hold
/// a password.
pub(crate) fn check_url(url: &str, schemes: &[&str]) -> Result<(), String> {
    let expected = schemes
        .iter()
        .map(|s| format!("{s}://"))
        .collect::<Vec<_>>()
        .join(" or ");
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("not a URL: expected {expected}"));
    };
    if !schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        return Err(format!(
            "unsupported scheme {scheme:?}: expected {expected}"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err("URL has no host".to_string());
    }
    if url.chars().any(char::is_whitespace) {
        return Err("URL contains whitespace".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_only_the_password() {
        assert_eq!(
            redact_password("postgres://u:s3cret@db:5432/txmgr?sslmode=require"),
            "postgres://u:***@db:5432/txmgr?sslmode=require"
        );
        assert_eq!(
            redact_password("postgres://u:p@ss@db/x"),
            "postgres://u:***@db/x"
        );
        assert_eq!(
            redact_password("postgres://postgres@127.0.0.1/txmgr"),
            "postgres://postgres@127.0.0.1/txmgr"
        );
        assert_eq!(redact_password("http://h/a@b:c"), "http://h/a@b:c");
        assert_eq!(
            redact_password("postgres://u@db/x?sslmode=verify-full&password=s3cret&PASSWORD=x"),
            "postgres://u@db/x?sslmode=verify-full&password=***&PASSWORD=***"
        );
    }

    #[test]
    fn shows_scheme_and_host_only() {
        assert_eq!(
            shown_url("https://u:p@eth.example:8443/v2/SECRET?key=K"),
            "https://eth.example:8443"
        );
        assert_eq!(
            shown_url("wss://eth.example/ws/SECRET"),
            "wss://eth.example"
        );
        assert_eq!(shown_url("SECRET"), "<invalid URL>");
    }

    #[test]
    fn checks_scheme_and_host() {
        assert!(check_url("http://127.0.0.1:8545", &["http", "https"]).is_ok());
        assert!(check_url("ws://127.0.0.1:8545", &["http", "https"]).is_err());
        assert!(check_url("http://", &["http"]).is_err());
        assert!(check_url("localhost:8545", &["http"]).is_err());
        let reason = check_url("ftp://u:secret@h", &["http"]).expect_err("must be rejected");
        assert!(!reason.contains("secret"));
    }
}
