//! A test that cannot run here says so where it is seen: the harness
//! captures `eprintln!` of a passing test, which would leave a bare "ok".

use std::io::Write;

/// Print `SKIPPED test: reason` on the real stderr (not the captured one).
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {reason}");
}
