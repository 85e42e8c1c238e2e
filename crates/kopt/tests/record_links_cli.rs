//! #39: kopt's default record paths lie in the repository, which a clone
//! brings. A link planted there (`OPTIMIZATIONS.md -> ../victim.sh`, a
//! dangling `.kopt/history.db -> ../../outside/new.db`, `.kopt -> ..`)
//! made kopt write outside it; the default is now refused, saying what and
//! where, while a path named with a flag may still go through a link.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output};

fn kopt(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .current_dir(dir)
        .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
        .output()
        .unwrap()
}

/// `top/repo` (a git repository, its working folder `repo/sub`) and
/// `top/outside`.
fn repo() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::create_dir_all(d.path().join("outside")).unwrap();
    (d, repo)
}

const BENCH: [&str; 13] = [
    "bench",
    "--baseline",
    "true",
    "--candidate",
    "true",
    "--max-time",
    "0.2",
    "--min-time",
    "0.05",
    "--min-samples",
    "2",
    "--warmup",
    "0",
];

#[test]
fn a_planted_journal_link_is_refused_for_the_default_only() {
    let (d, repo) = repo();
    let victim = d.path().join("victim.sh");
    std::fs::write(&victim, "export PATH=/usr/bin:$PATH\n").unwrap();
    symlink("../victim.sh", repo.join("OPTIMIZATIONS.md")).unwrap();
    for args in [
        &["journal", "add", "--hypothesis", "x"][..],
        &["journal", "show"][..],
    ] {
        let o = kopt(&repo.join("sub"), args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("refused: kopt's default journal goes through a symbolic link at")
                && err.contains("OPTIMIZATIONS.md (to ../victim.sh)")
                && err.contains("--file"),
            "{args:?}: {err}"
        );
    }
    // bench --journal writes the same default.
    let mut args = BENCH.to_vec();
    args.extend(["--journal", "x", "--db", "h.db"]);
    let o = kopt(&repo, &args);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("default journal"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "export PATH=/usr/bin:$PATH\n"
    );
    // Named with a flag, the link is the user's choice and is followed.
    let o = kopt(
        &repo,
        &[
            "journal",
            "add",
            "--hypothesis",
            "x",
            "--file",
            "OPTIMIZATIONS.md",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&victim).unwrap().contains(": x"));
}

#[test]
fn a_planted_history_link_or_kopt_folder_link_writes_nothing_outside() {
    let (d, repo) = repo();
    let outside = d.path().join("outside");
    std::fs::create_dir(repo.join(".kopt")).unwrap();
    symlink("../../outside/new.db", repo.join(".kopt/history.db")).unwrap();
    let o = kopt(&repo.join("sub"), &BENCH);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("run not recorded in the history")
            && err.contains("default history database goes through a symbolic link")
            && err.contains("(to ../../outside/new.db)"),
        "{err}"
    );
    assert!(!outside.join("new.db").exists());
    let o = kopt(&repo, &["history"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link"));
    // `--db` naming the link is followed, as before.
    let o = kopt(&repo, &[&BENCH[..], &["--db", ".kopt/history.db"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(outside.join("new.db").exists());

    // The whole `.kopt` folder a link: history, tune cache and runs refused.
    let (d, repo) = self::repo();
    let outside = d.path().join("outside");
    symlink("../outside", repo.join(".kopt")).unwrap();
    let o = kopt(&repo, &BENCH);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("symbolic link at") && err.contains(".kopt (to ../outside)"),
        "{err}"
    );
    let o = kopt(
        &repo,
        &[
            "tune",
            "-p",
            "A=1,2",
            "--max-time",
            "0.1",
            "--min-samples",
            "2",
            "--warmup",
            "0",
            "--",
            "true {A}",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no tune cache") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
