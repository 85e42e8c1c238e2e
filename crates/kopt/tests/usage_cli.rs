//! First contact (#27): help wrapped at the terminal's width, usage errors
//! on one `kopt: error:` line, and `--top -1` not advised as `-- -1`.

use std::process::{Command, Output};

fn kopt(args: &[&str], columns: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kopt"));
    c.args(args);
    match columns {
        Some(n) => c.env("COLUMNS", n),
        None => c.env_remove("COLUMNS"),
    };
    c.output().unwrap()
}

#[test]
fn help_is_wrapped_at_the_terminal_width() {
    for sub in [
        &["--help"][..],
        &["analyze", "--help"],
        &["profile", "--help"],
        &["bench", "--help"],
        &["tune", "--help"],
        &["compare", "--help"],
    ] {
        let o = kopt(sub, Some("80"));
        assert_eq!(o.status.code(), Some(0), "{sub:?}");
        let text = String::from_utf8(o.stdout).unwrap();
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= 80, "{sub:?}: a line of {widest} characters");
        assert!(!text.contains('\u{1b}'), "escapes in piped help");
    }
}

#[test]
fn usage_errors_are_one_line() {
    for (args, want) in [
        (
            &["analyze", "--top", "-1", "x.csv"][..],
            "--top -1: --top takes a number of 0 or more",
        ),
        (&["analyze", "--top=-1", "x.csv"], "invalid value '-1'"),
        (&["bench", "--bogus"], "unexpected argument '--bogus'"),
        (
            &["analyze"],
            "required arguments were not provided: <FILE>...",
        ),
        (&["frobnicate"], "unrecognized subcommand 'frobnicate'"),
        (
            &["analyze", "x.csv", "--format", "xml"],
            "invalid value 'xml'",
        ),
    ] {
        let o = kopt(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("kopt: error: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(err.contains("--help')"), "{args:?}: {err}");
        assert!(!err.contains("-- -1"), "{args:?}: {err}");
    }
}
