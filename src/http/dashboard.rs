//! `GET /ops/`: the live operator dashboard — one self-contained HTML page
//! (inline CSS and script, no external assets) that asks for an ops token,
//! keeps it in `sessionStorage`, and polls `/v1/ops/actors` and
//! `/v1/ops/cluster` every two seconds with it as a bearer header.

use axum::{
    http::header,
    response::{IntoResponse, Redirect, Response},
};

/// The page, compiled into the binary, with the charting library (uPlot
/// 1.6.32, MIT, `vendor/`) inlined: one self-contained response that works
/// offline.
static PAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    include_str!("dashboard.html")
        .replace("/*UPLOT_CSS*/", include_str!("vendor/uPlot.min.css"))
        .replace("/*UPLOT_JS*/", include_str!("vendor/uPlot.iife.min.js"))
});

/// `GET /ops/`.
#[utoipa::path(get, path = "/ops/", tag = "meta",
    responses((status = 200, description = "the ops dashboard (its data needs an ops token)", content_type = "text/html")))]
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE.as_str(),
    )
        .into_response()
}

/// `GET /ops` → `/ops/`.
pub(crate) async fn redirect() -> Redirect {
    Redirect::permanent("/ops/")
}
