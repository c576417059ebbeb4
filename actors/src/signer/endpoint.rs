//! A remote signer's URL: validated, shown with its password redacted, and
//! with basic-auth credentials moved into a sensitive header so that no
//! transport log line can print them.

use alloy::transports::http::reqwest::{
    header::{HeaderMap, HeaderValue, AUTHORIZATION},
    Url,
};

use super::SignerError;

/// A parsed remote signer endpoint.
pub(super) struct Endpoint {
    /// The URL to send requests to, without credentials.
    pub(super) url: Url,
    /// The URL for messages and Debug, password redacted.
    pub(super) shown: String,
    /// Default headers: `Authorization` (sensitive) when the URL had
    /// credentials, else empty.
    pub(super) headers: HeaderMap,
}

impl Endpoint {
    /// Parses an `http`/`https` URL. Errors never echo the URL, which may
    /// carry a password.
    pub(super) fn parse(url: &str) -> Result<Endpoint, SignerError> {
        let mut parsed = Url::parse(url).map_err(|e| {
            SignerError::Config(format!("remote signer URL is not a valid URL: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(SignerError::Config(format!(
                "remote signer URL scheme must be http or https, not {}",
                parsed.scheme()
            )));
        }
        let shown = redact_url(url);
        let mut headers = HeaderMap::new();
        if !parsed.username().is_empty() || parsed.password().is_some() {
            // Sent as written in the URL (percent-encoding is not undone).
            let credentials = format!("{}:{}", parsed.username(), parsed.password().unwrap_or(""));
            let mut value =
                HeaderValue::from_str(&format!("Basic {}", base64(credentials.as_bytes())))
                    .map_err(|_| SignerError::Config(format!("{shown}: unusable credentials")))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
            // Both setters only fail for URLs that cannot have credentials,
            // and this one just had some.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
        }
        Ok(Endpoint {
            url: parsed,
            shown,
            headers,
        })
    }
}

/// `scheme://host[:port]` of `url`, for messages and Debug: user info, path
/// and query may carry credentials or API keys. Unparsable input is not
/// shown at all, as it may be a secret.
pub(super) fn redact_url(url: &str) -> String {
    crate::chain::shown_url(url)
}

/// Standard base64 with padding, for the basic-auth header (too small a
/// need for another dependency).
fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
    }

    #[test]
    fn redacts_password_and_hides_unparsable_urls() {
        assert_eq!(redact_url("http://u:secret@host:1/x"), "http://host:1");
        assert_eq!(redact_url("https://host/v2/KEY?k=KEY"), "https://host");
        assert_eq!(redact_url("not a url secret"), "<invalid URL>");
    }

    #[test]
    fn credentials_move_into_a_sensitive_header() {
        let e = Endpoint::parse("https://user:pass@signer.example/rpc").unwrap();
        assert_eq!(e.url.as_str(), "https://signer.example/rpc");
        assert_eq!(e.shown, "https://signer.example");
        let auth = &e.headers[AUTHORIZATION];
        assert!(auth.is_sensitive());
        assert_eq!(auth, "Basic dXNlcjpwYXNz");
        assert!(Endpoint::parse("http://127.0.0.1:1")
            .unwrap()
            .headers
            .is_empty());
    }
}
