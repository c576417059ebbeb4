//! What a web page in the operator's browser must not be able to do to a
//! node (README "Security"): without tokens the API answers anyone who
//! reaches the loopback address — and so would answer a page the operator
//! happens to open.
//!
//! ```text
//! request ─► tokenless? Host names the node (localhost, 127.0.0.1, [::1] or the
//!            listen address, with its port)?  no ─► 421 misdirected_request
//!         ─► POST to a POST route with Content-Type
//!            application/json?                no ─► 415 unsupported_media_type
//! ```
//!
//! - A cross-site page can send a POST without CORS (`mode: 'no-cors'`)
//!   only with a "simple" content type (form, text/plain) or none; one that
//!   says `application/json` needs a CORS preflight, which this server
//!   never grants. So every state-changing route requires it, even with an
//!   empty body, in every mode.
//! - DNS rebinding points an attacker's name at 127.0.0.1, after which the
//!   page may read the answers; its requests still carry the attacker's
//!   name in `Host`. Tokenless, only the node's own names are served. (With
//!   tokens, a page has no token to send.) A request without `Host` comes
//!   from no browser and is let through.

use std::{borrow::Cow, net::SocketAddr, sync::Arc};

use axum::{
    extract::{MatchedPath, Request, State},
    http::{header, Method},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{error::ApiError, json::is_json, openapi::ROUTES, OpsState};

/// The `Host` values a tokenless node answers: the loopback names with the
/// port it listens on, and its listen address.
#[derive(Debug, Clone)]
pub struct LocalHosts {
    /// Lower-case `host:port` values; empty = any port of a loopback name
    /// (a router built without a socket, in tests and tools).
    allowed: Arc<[String]>,
    /// Whether a `Host` without a port is one of ours (port 80 or 443).
    portless: bool,
}

impl LocalHosts {
    /// For a node bound to `listen` (`None`: not bound to a socket).
    pub fn new(listen: Option<SocketAddr>) -> Self {
        let Some(listen) = listen else {
            return Self {
                allowed: Arc::from([]),
                portless: false,
            };
        };
        let port = listen.port();
        let mut allowed: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|host| format!("{host}:{port}"))
            .collect();
        allowed.push(listen.to_string().to_ascii_lowercase());
        Self {
            allowed: allowed.into(),
            portless: matches!(port, 80 | 443),
        }
    }

    /// Whether `host` (a `Host` header or URI authority) names this node.
    /// Compared without regard to ASCII case, with no copy made: it runs
    /// for every request of a tokenless node.
    pub(crate) fn admits(&self, host: &str) -> bool {
        let host = host.trim();
        let (name, port) = split_port(host);
        if self.allowed.is_empty() {
            return ["localhost", "127.0.0.1", "[::1]"]
                .iter()
                .any(|loopback| loopback.eq_ignore_ascii_case(name));
        }
        match port {
            Some(_) => self
                .allowed
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(host)),
            None => {
                self.portless
                    && self
                        .allowed
                        .iter()
                        .any(|allowed| split_port(allowed).0.eq_ignore_ascii_case(name))
            }
        }
    }
}

/// `name` and `port` of `host:port`, `[v6]:port`, `host` or `[v6]`.
fn split_port(host: &str) -> (&str, Option<&str>) {
    let after_name = if host.starts_with('[') {
        host.find(']').map_or(host.len(), |end| end + 1)
    } else {
        host.find(':').unwrap_or(host.len())
    };
    let (name, rest) = host.split_at(after_name);
    (name, rest.strip_prefix(':'))
}

/// The `Host` of a request: the header, or the URI's authority (HTTP/2).
fn requested_host(request: &Request) -> Option<Cow<'_, str>> {
    request
        .headers()
        .get(header::HOST)
        .map(|value| String::from_utf8_lossy(value.as_bytes()))
        .or_else(|| request.uri().authority().map(|a| Cow::Borrowed(a.as_str())))
}

/// Middleware: in tokenless mode, 421 unless `Host` names this node.
pub(crate) async fn check_host(
    State(ops): State<Arc<OpsState>>,
    request: Request,
    next: Next,
) -> Response {
    if !ops.auth.enabled() {
        if let Some(host) = requested_host(&request) {
            if !ops.local_hosts.admits(&host) {
                return ApiError::MisdirectedRequest(format!(
                    "this node answers only requests for its own address (localhost, 127.0.0.1 or [::1] with its port) while no tokens are configured; Host was {:?}",
                    host.chars().take(100).collect::<String>()
                ))
                .into_response();
            }
        }
    }
    next.run(request).await
}

/// Whether the request is a POST to a route that has one: every route that
/// changes state is a POST; a method a route lacks keeps its 405.
fn changes_state(request: &Request) -> bool {
    request.method() == Method::POST
        && request
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|path| {
                ROUTES
                    .iter()
                    .any(|&(method, route)| method == "post" && route == path.as_str())
            })
}

/// Route middleware: 415 for a POST that does not say `Content-Type:
/// application/json` (an empty body is fine).
pub(crate) async fn require_json(request: Request, next: Next) -> Response {
    if changes_state(&request) && !is_json(request.headers()) {
        return ApiError::UnsupportedMediaType(
            "every POST needs Content-Type: application/json, even with an empty body".to_owned(),
        )
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_node_admits_its_names_with_its_port_only() {
        let hosts = LocalHosts::new(Some(([127, 0, 0, 1], 8080).into()));
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LocalHost:8080",
        ] {
            assert!(hosts.admits(host), "{host}");
        }
        for host in [
            "attacker.example:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.1.nip.io:8080",
            "localhost.attacker.example:8080",
            "",
        ] {
            assert!(!hosts.admits(host), "{host}");
        }
    }

    #[test]
    fn the_listen_address_itself_is_admitted() {
        let hosts = LocalHosts::new(Some(([127, 0, 0, 5], 80).into()));
        assert!(hosts.admits("127.0.0.5:80"));
        assert!(hosts.admits("127.0.0.5"), "port 80 may be left out");
        assert!(hosts.admits("localhost"));
        assert!(!hosts.admits("127.0.0.6"));
    }

    #[test]
    fn an_unbound_router_admits_loopback_names_on_any_port() {
        let hosts = LocalHosts::new(None);
        assert!(hosts.admits("localhost:1234"));
        assert!(hosts.admits("[::1]"));
        assert!(!hosts.admits("attacker.example:1234"));
    }
}
