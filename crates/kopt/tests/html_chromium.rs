//! The HTML report in a real browser: headless Chromium (Debian's `chromium`,
//! installed by .ci/run) renders it without console errors, the DOM holds one
//! roofline point per hot kernel, and a screenshot is saved.
//! Without Chromium the test is skipped, unless KOPT_REQUIRE_CHROMIUM is set (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/chromium.rs"]
mod chromium;

use chromium::chromium;

/// The browser with its console sent to stderr, where the test reads it.
fn headless(chrome: &Path, profile: &Path) -> Command {
    let mut c = chromium::headless(chrome, profile);
    c.args(["--enable-logging=stderr", "--v=0"]);
    c
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(chrome) = chromium() else {
        assert!(
            std::env::var_os("KOPT_REQUIRE_CHROMIUM").is_none(),
            "KOPT_REQUIRE_CHROMIUM is set but chromium is not installed"
        );
        eprintln!("skipped: chromium not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("suite.html");
    let json = dir.path().join("suite.json");
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "json", "--html"])
        .arg(&page)
        .arg("-o")
        .arg(&json)
        .arg(&fixture)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let hot = report["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["bottleneck"]["class"] != "unknown")
        .count()
        .min(100);

    let url = format!("file://{}", page.display());
    let dom = headless(&chrome, &dir.path().join("profile-dom"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    let stderr = String::from_utf8_lossy(&dom.stderr);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(
        html.contains("<svg class=\"roofline\""),
        "roofline missing from the rendered DOM"
    );
    assert_eq!(
        html.matches("<circle class=\"pt ").count(),
        hot,
        "one point per hot kernel"
    );

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kopt-labeled-suite-report.png");
    let s = headless(&chrome, &dir.path().join("profile-shot"))
        .arg("--window-size=1280,2400")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot looks empty"
    );
    eprintln!("screenshot: {}", shot.display());
}
