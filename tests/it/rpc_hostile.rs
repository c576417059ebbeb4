//! An RPC endpoint that misbehaves (README "Security"): an error text that
//! echoes only the API key of the URL is scrubbed before it is stored or
//! shown, a redirect is never followed (the key would go with it, maybe to
//! plain http), and an oversized answer is refused instead of buffered.
//! Served by a small axum server on loopback standing in for the provider.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Router,
};
use txmgr_actors::chain::{ChainClient, ChainError, EvmRpc};

const KEY: &str = "KEYabc987";

/// Starts `router` on a loopback port; returns its base URL.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{address}")
}

fn client(url: &str) -> EvmRpc {
    let tls = txmgr_actors::tls::client_config(None).expect("tls");
    EvmRpc::new("provider", url, Duration::from_secs(5), &tls).expect("client")
}

fn text(err: &ChainError) -> String {
    err.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_echoing_only_the_key_is_scrubbed() {
    let echo = Router::new().fallback(|| async {
        axum::Json(serde_json::json!({"jsonrpc": "2.0", "id": 0,
            "error": {"code": -32000, "message": format!("invalid api key {KEY} (project {KEY})")}}))
    });
    let base = serve(echo).await;
    for url in [
        format!("{base}/v2/{KEY}"),
        format!("{base}/?apikey={KEY}"),
        format!("{base}/rpc?key={KEY}&x=1"),
    ] {
        let err = client(&url)
            .chain_id()
            .await
            .expect_err("the server refuses");
        assert!(matches!(err, ChainError::Rpc { .. }), "{err:?}");
        assert!(!text(&err).contains(KEY), "{url}: {err}");
        assert!(text(&err).contains("invalid api key"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed() {
    let hits = Arc::new(AtomicUsize::new(0));
    let target = Router::new()
        .fallback(|State(hits): State<Arc<AtomicUsize>>| async move {
            hits.fetch_add(1, Ordering::SeqCst);
            StatusCode::OK
        })
        .with_state(hits.clone());
    let elsewhere = serve(target).await;
    let redirecting = Router::new()
        .fallback(|State(to): State<String>| async move {
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, format!("{to}/stolen/{KEY}"))],
            )
                .into_response()
        })
        .with_state(elsewhere);
    let base = serve(redirecting).await;
    let err = client(&format!("{base}/v2/{KEY}"))
        .chain_id()
        .await
        .expect_err("a 307 is an error");
    assert!(!text(&err).contains(KEY), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect was followed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_answer_is_refused() {
    let huge = Router::new().fallback(|| async {
        // 65 MiB of padding inside a valid JSON-RPC answer.
        let padding = " ".repeat(65 << 20);
        let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":0,{padding}\"result\":\"0x1\"}}");
        Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body))
            .expect("response")
    });
    let base = serve(huge).await;
    let err = client(&format!("{base}/v2/{KEY}"))
        .chain_id()
        .await
        .expect_err("too large");
    assert!(matches!(err, ChainError::Transport(_)), "{err:?}");
    assert!(text(&err).contains("larger than"), "{err}");
}
