//! `GET /ops/`: the live operator dashboard — one self-contained HTML page
//! (inline CSS and script, no external assets) that asks for an ops token,
//! keeps it in `sessionStorage`, and polls `/v1/ops/actors` and
//! `/v1/ops/cluster` every two seconds with it as a bearer header.

use axum::{
    http::header,
    response::{IntoResponse, Redirect, Response},
};

/// The page, compiled into the binary.
pub(crate) const PAGE: &str = include_str!("dashboard.html");

/// `GET /ops/`.
#[utoipa::path(get, path = "/ops/", tag = "meta",
    responses((status = 200, description = "the ops dashboard (its data needs an ops token)", content_type = "text/html")))]
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
        .into_response()
}

/// `GET /ops` → `/ops/`.
pub(crate) async fn redirect() -> Redirect {
    Redirect::permanent("/ops/")
}
