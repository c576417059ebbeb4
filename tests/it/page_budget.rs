//! The node-wide budget of page bytes in flight (README "Limits"): with room
//! for one page, a second list or feed request while the first page is
//! still unsent gets 503 `busy` at once, and the budget is back once the
//! first page has been read.

use std::sync::Arc;

use alloy::primitives::Address;
use axum::{
    body::{to_bytes, Body},
    http::Request,
    Router,
};
use tower::ServiceExt;
use txmgr::{
    config::DEFAULT_MAX_LONG_POLLS,
    http::{app, AppState, CompletionNotifier, DirectSubmissions, Limits, ServedChains},
};

use crate::common::{TestDb, DEV};

fn router(db: &TestDb) -> Router {
    let known = [DEV.parse::<Address>().expect("address literal")];
    let page = 64 * 1024;
    app(AppState {
        pool: db.pool.clone(),
        chains: ServedChains::single(
            31337u64.into(),
            Arc::new(DirectSubmissions::new(db.pool.clone(), known)),
        ),
        limits: Limits {
            page_max_bytes: page,
            page_bytes_in_flight: page,
            ..Limits::default()
        },
        completions: CompletionNotifier::listen(db.pool.clone(), DEFAULT_MAX_LONG_POLLS),
        ops: Default::default(),
    })
}

async fn send(app: &Router, uri: &str) -> axum::response::Response {
    let request = Request::get(uri).body(Body::empty()).expect("request");
    app.clone().oneshot(request).await.expect("infallible")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_beyond_the_node_budget_is_refused_busy_until_one_is_sent() {
    let db = TestDb::migrated().await;
    let app = router(&db);
    let list = format!("/v1/transactions?submitter={DEV}");
    for uri in [list.as_str(), "/v1/completions"] {
        let held = send(&app, uri).await;
        assert_eq!(held.status(), 200, "{uri}");
        // Its body is not read yet: the page still counts.
        for other in [list.as_str(), "/v1/completions"] {
            let refused = send(&app, other).await;
            assert_eq!(refused.status(), 503, "{uri} held, {other} asked");
            assert!(refused.headers().contains_key("retry-after"));
            let body = to_bytes(refused.into_body(), usize::MAX)
                .await
                .expect("body");
            assert!(String::from_utf8_lossy(&body).contains("\"busy\""));
        }
        let body = to_bytes(held.into_body(), usize::MAX).await.expect("body");
        let page: serde_json::Value = serde_json::from_slice(&body).expect("JSON page");
        assert!(page["items"].is_array(), "{page}");
        assert_eq!(send(&app, uri).await.status(), 200, "budget back");
    }
}
