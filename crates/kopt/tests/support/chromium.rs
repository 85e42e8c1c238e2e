//! Headless Chromium for the HTML page's browser test and benchmark.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's Chromium (installed by .ci/run), if this machine has it.
pub fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Headless with the flags a sandboxed CI machine without network needs,
/// and its own profile folder.
pub fn headless(chrome: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}
