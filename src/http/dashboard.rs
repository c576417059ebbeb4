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

#[cfg(test)]
mod tests {
    /// Every POST of the page says JSON: the server refuses (415) the kinds
    /// of POST a cross-site page can send, so a button without it would fail.
    #[test]
    fn every_post_of_the_page_sends_json() {
        let page = include_str!("dashboard.html");
        let posts: Vec<&str> = page.split("method: \"POST\"").skip(1).collect();
        assert!(posts.len() >= 3, "the page's POSTs were not found");
        for (i, rest) in posts.iter().enumerate() {
            let options = &rest[..rest.find(");").unwrap_or(rest.len())];
            assert!(
                options.contains("\"content-type\": \"application/json\""),
                "POST no. {} of the page sends no JSON content type: {options}",
                i + 1
            );
        }
    }
}
