//! Running the built `kopt` in a test folder, and what it printed.

use std::path::Path;
use std::process::{Command, Output};

/// `kopt ARGS` run in `dir`, waited for.
pub fn kopt(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Its standard error as text.
#[allow(dead_code)] // not every test file reads stderr
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
