//! Headless Chromium for the ops page's tests: which binary, and the
//! rule that a missing browser is a skip only outside CI and outside
//! `scripts/test.sh` (which sets `TXMGR_REQUIRE_CHROMIUM` once it has one).

use std::path::Path;

/// The Chromium binary that runs here.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|bin| {
            std::process::Command::new(bin)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The browser, or `None` (after saying so) when the test may be skipped;
/// panics where a missing browser must fail.
pub(crate) fn chromium_or_skip() -> Option<&'static str> {
    let browser = chromium();
    if browser.is_none() {
        assert!(
            std::env::var_os("TXMGR_REQUIRE_CHROMIUM").is_none(),
            "TXMGR_REQUIRE_CHROMIUM is set but no chromium binary runs"
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but no chromium binary runs: install Debian's chromium package"
        );
        eprintln!("SKIPPED: no chromium binary (apt-get install -y chromium)");
    }
    browser
}

/// The DOM of `url` after its scripts ran for `budget_ms` of virtual time.
pub(crate) async fn dump_dom(browser: &str, url: &str, budget_ms: u32) -> String {
    let profile = std::env::temp_dir().join(format!("txmgr-chromium-{}", uuid::Uuid::new_v4()));
    let output = tokio::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--dump-dom",
        ])
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .await
        .expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A PNG of `url` (`width` × `height`) at `path`, after `budget_ms`.
pub(crate) async fn screenshot(
    browser: &str,
    url: &str,
    path: &Path,
    size: (u32, u32),
    budget_ms: u32,
) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("screenshot dir");
    }
    let profile = std::env::temp_dir().join(format!("txmgr-chromium-{}", uuid::Uuid::new_v4()));
    let status = tokio::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", path.display()))
        .arg(url)
        .output()
        .await
        .expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        path.exists(),
        "no screenshot at {}: {}",
        path.display(),
        String::from_utf8_lossy(&status.stderr)
    );
}
