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
            "--top -1: --top takes no negative number",
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

/// #41: a mistyped subcommand or flag names the nearest valid one, on the
/// same single line.
#[test]
fn typos_get_a_did_you_mean() {
    for (args, want) in [
        (&["analyse", "x.csv"][..], "did you mean 'analyze'?"),
        (&["histroy"], "did you mean 'history'?"),
        (
            &["analyze", "x.csv", "--formt", "md"],
            "did you mean '--format'?",
        ),
        (&["bench", "--baselin", "x"], "did you mean '--baseline'?"),
    ] {
        let o = kopt(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // Nothing near: no guess.
    let o = kopt(&["frobnicate"], None);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(!err.contains("did you mean"), "{err}");
}

/// #41: the `--db` help is a whole sentence, not cut at "the report's".
#[test]
fn db_help_is_whole() {
    let o = kopt(&["analyze", "--help"], Some("200"));
    let text = String::from_utf8(o.stdout).unwrap();
    let db = text
        .split("--db <FILE>")
        .nth(1)
        .expect("analyze documents --db");
    let line = db.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(!line.contains("calibrate the report's ["), "{line}");
    assert!(line.contains("predicted gains"), "{line}");
}

/// #41: `kopt --help` and the docs describe `history` in the same words.
#[test]
fn history_is_described_alike_in_help_and_docs() {
    let o = kopt(&["--help"], Some("300"));
    let help = String::from_utf8(o.stdout).unwrap();
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("history "))
        .expect("history in --help");
    let about = line.trim_start()["history".len()..].trim();
    let what = about.split(';').next().unwrap().trim();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let docs = std::fs::read_to_string(format!("{root}/README.md")).unwrap()
        + &std::fs::read_to_string(format!("{root}/docs/cli.md")).unwrap_or_default();
    assert!(
        docs.to_lowercase().contains(&what.to_lowercase()),
        "the docs do not describe history as --help does: {what:?}"
    );
}
