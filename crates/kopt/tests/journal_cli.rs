//! `kopt journal`: entries land in OPTIMIZATIONS.md at the repository root.

use std::process::Command;

#[test]
fn add_then_show() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(".git")).unwrap();
    let sub = d.path().join("kernels");
    std::fs::create_dir(&sub).unwrap();
    let add = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kopt"))
            .args(["journal", "add"])
            .args(args)
            .current_dir(&sub)
            .output()
            .unwrap()
    };
    let o = add(&[
        "--hypothesis",
        "pad smem rows",
        "--predict",
        "-30% in k_transpose",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = add(&[
        "--hypothesis",
        "pad smem rows",
        "--outcome",
        "-53%",
        "--verdict",
        "keep",
        "--run",
        ".kopt/runs/x",
    ]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(d.path().join("OPTIMIZATIONS.md")).unwrap();
    assert_eq!(text.matches(": pad smem rows").count(), 2);
    assert!(text.contains("- **Verdict:** KEEP"));
    let bad = add(&["--hypothesis", "x", "--verdict", "maybe"]);
    assert_eq!(bad.status.code(), Some(2));
    let show = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["journal", "show"])
        .current_dir(&sub)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&show.stdout), text);
}

/// #39: `journal show` printed the file raw: an escape sequence in it
/// drove the terminal.
#[test]
fn show_escapes_control_characters() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("j.md");
    std::fs::write(&f, "# J\n\n## w: \u{1b}[2J\u{1b}]0;pwned\u{7}title\n").unwrap();
    let show = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["journal", "show", "--file"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        show.status.success(),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let out = String::from_utf8_lossy(&show.stdout);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(
        out.contains("title\n") && out.starts_with("# J\n\n## w: "),
        "{out:?}"
    );
}

/// #41: `journal show` where nothing was written yet is not an error: one
/// line naming the file, exit 0 (as `kopt history` does), nothing created.
#[test]
fn show_in_a_fresh_repository_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(".git")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["journal", "show"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("OPTIMIZATIONS.md"), "{out}");
    assert!(!d.path().join("OPTIMIZATIONS.md").exists());
}
