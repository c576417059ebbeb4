//! Keeping RPC URLs out of every text: URLs of hosted endpoints carry API
//! keys in their path or query, so errors are rendered without them and
//! anything else that might repeat them is scrubbed.

use alloy::transports::{http::reqwest, RpcError, TransportErrorKind};

/// The text of a transport failure with its causes (connection refused,
/// certificate not trusted…), using reqwest's URL-free rendering.
pub(super) fn transport_text(err: &RpcError<TransportErrorKind>) -> String {
    if let RpcError::Transport(TransportErrorKind::Custom(inner)) = err {
        if let Some(http) = inner.downcast_ref::<reqwest::Error>() {
            let mut text = String::from("HTTP request failed");
            let mut source = std::error::Error::source(http);
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            if let Some(status) = http.status() {
                text.push_str(&format!(" (HTTP {status})"));
            }
            return text;
        }
    }
    err.to_string()
}

/// The strings under which a URL's secrets can show up in error texts: the
/// URL as written and as normalised, its path and query, and each of their
/// parts on its own — a path segment, a query value, the user name and the
/// password — since a server or a library may echo just the key (longest
/// first, so a whole URL is replaced before its parts). Parts shorter than
/// four characters (`v2`, `rpc`) are left: they are no keys, and replacing
/// them would garble every message.
pub(crate) fn secret_renderings(written: &str, parsed: &reqwest::Url) -> Vec<String> {
    let mut out = vec![written.to_owned(), parsed.as_str().to_owned()];
    if let Some(query) = parsed.query() {
        out.push(query.to_owned());
        for pair in query.split('&') {
            out.push(pair.to_owned());
            if let Some((_, value)) = pair.split_once('=') {
                out.push(value.to_owned());
            }
        }
        for (_, value) in parsed.query_pairs() {
            out.push(value.into_owned());
        }
    }
    if parsed.path().len() > 1 {
        out.push(parsed.path().to_owned());
        out.extend(parsed.path().split('/').map(str::to_owned));
    }
    out.push(parsed.username().to_owned());
    if let Some(password) = parsed.password() {
        out.push(password.to_owned());
    }
    out.retain(|s| s.len() >= 4);
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// `text` with every one of `secrets` (see [`secret_renderings`]) replaced
/// by `shown`.
pub(crate) fn scrub(mut text: String, secrets: &[String], shown: &str) -> String {
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), shown);
        }
    }
    text
}

/// `scheme://host[:port]` of a URL, the most of it that may be shown; a
/// string that does not parse is not shown at all.
pub fn shown_url(url: &str) -> String {
    match url.parse::<reqwest::Url>() {
        Ok(parsed) => match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", parsed.scheme()),
            (Some(host), None) => format!("{}://{host}", parsed.scheme()),
            (None, _) => format!("{}://", parsed.scheme()),
        },
        Err(_) => "<invalid URL>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rendering_of_a_secret_url_is_listed_longest_first() {
        let url = "https://u:pw12@host.example/v2/SECRET123?apikey=SECRET123";
        let parsed: reqwest::Url = url.parse().expect("url");
        let secrets = secret_renderings(url, &parsed);
        assert_eq!(secrets[0], url);
        assert!(secrets.iter().any(|s| s == "/v2/SECRET123"));
        assert!(secrets.iter().any(|s| s == "apikey=SECRET123"));
        assert!(secrets.iter().any(|s| s == "pw12"));
        assert!(secrets.windows(2).all(|w| w[0].len() >= w[1].len()));
        // A server echoing only the key, from the path or the query.
        assert!(secrets.iter().any(|s| s == "SECRET123"));
        let text = scrub(
            "invalid api key SECRET123 for pw12".to_owned(),
            &secrets,
            "<e>",
        );
        assert_eq!(text, "invalid api key <e> for <e>");
        // A query without a path (wss://host?key=K).
        let url = "wss://host.example?key=KEY9876";
        let secrets = secret_renderings(url, &url.parse().expect("url"));
        let text = scrub(format!("failed: {url}/ and KEY9876"), &secrets, "<e>");
        assert!(!text.contains("KEY9876"), "{text}");
    }

    #[test]
    fn shown_urls_keep_scheme_host_and_port_only() {
        assert_eq!(
            shown_url("https://h.example:8443/v2/KEY?k=KEY"),
            "https://h.example:8443"
        );
        assert_eq!(shown_url("wss://u:p@h.example/ws/KEY"), "wss://h.example");
        assert_eq!(shown_url("KEY"), "<invalid URL>");
    }
}
