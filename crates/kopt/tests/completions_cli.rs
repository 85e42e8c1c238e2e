//! `kopt completions SHELL` and `kopt man`: generated from the parser's own
//! definition, printed on stdout, exit 0.

use std::process::Command;

fn kopt(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .output()
        .expect("kopt runs");
    assert!(
        o.status.success(),
        "kopt {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn bash_completion_names_kopt_and_its_commands() {
    let text = kopt(&["completions", "bash"]);
    assert!(text.contains("kopt"), "{text}");
    for sub in [
        "analyze", "profile", "trace", "bench", "compare", "optimize",
    ] {
        assert!(text.contains(sub), "{sub} missing");
    }
    // Flags of a subcommand are completed too.
    assert!(text.contains("--format"));
}

#[test]
fn every_shell_gets_a_script() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = kopt(&["completions", shell]);
        assert!(text.contains("analyze"), "{shell}: no analyze");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// #41: every page's header carries kopt's version and a date.
#[test]
fn man_pages_carry_version_and_date() {
    let version = env!("CARGO_PKG_VERSION");
    for args in [&["man"][..], &["man", "analyze"], &["man", "history"]] {
        let text = kopt(args);
        let th = text.lines().find(|l| l.starts_with(".TH ")).unwrap();
        assert!(
            th.contains(&format!("\"kopt {version}\"")),
            "{args:?}: {th}"
        );
        // .TH NAME SECTION DATE "SOURCE" "MANUAL"
        let date = th.split_whitespace().nth(3).unwrap_or("").trim_matches('"');
        let digits: Vec<&str> = date.split('-').collect();
        assert!(
            digits.len() == 3 && digits.iter().all(|p| p.parse::<u32>().is_ok()),
            "{args:?}: no YYYY-MM-DD date in {th}"
        );
    }
}

#[test]
fn man_page_is_roff() {
    let text = kopt(&["man"]);
    assert!(
        text.contains(".TH kopt 1"),
        "{}",
        &text[..text.len().min(400)]
    );
    assert!(text.contains(".SH NAME"));
    assert!(text.contains("analyze"));
}

/// The help names both backends: `kopt profile` is not ncu-only, `--gpu`
/// says which variable each sets, `kopt analyze` lists the AMD formats.
#[test]
fn help_names_the_amd_backend_and_formats() {
    let man = kopt(&["man"]);
    assert!(
        !man.contains("under Nsight Compute in cheap passes"),
        "stale profile summary"
    );
    let profile = kopt(&["profile", "--help"]);
    assert!(profile.contains("rocprofv3"), "{profile}");
    assert!(profile.contains("HIP_VISIBLE_DEVICES"), "{profile}");
    assert!(profile.contains("CUDA_VISIBLE_DEVICES"), "{profile}");
    assert!(profile.contains("--backend rocprof"), "{profile}");
    let analyze = kopt(&["analyze", "--help"]);
    for format in ["rocprofv3", "rocpd", "rocprof-compute", "ncu --csv"] {
        assert!(analyze.contains(format), "{format} missing: {analyze}");
    }
    let top = kopt(&["--help"]);
    assert!(top.contains("ncu on NVIDIA, rocprofv3 on AMD"), "{top}");
}

#[test]
fn every_page_kopt_1_refers_to_exists() {
    // kopt(1) points to kopt-analyze(1) and the rest; they did not exist.
    let top = kopt(&["man"]);
    for sub in [
        "analyze", "profile", "trace", "compare", "journal", "history", "bench", "optimize", "tune",
    ] {
        assert!(top.contains(&format!("kopt\\-{sub}(1)")), "{sub}");
        let page = kopt(&["man", sub]);
        assert!(
            page.contains(&format!(".TH kopt-{sub} 1")),
            "{sub}: {}",
            &page[..200.min(page.len())]
        );
        assert!(page.contains(".SH OPTIONS"), "{sub}");
    }
}

#[test]
fn the_readme_completion_commands_work_on_a_fresh_home() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let after = readme
        .split("Shell completions and the man page:")
        .nth(1)
        .unwrap();
    let block = after
        .split("```sh")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_kopt"))
        .parent()
        .unwrap();
    let o = Command::new("bash")
        .args(["-euo", "pipefail", "-c", block])
        .env("HOME", home.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(home
        .path()
        .join(".local/share/bash-completion/completions/kopt")
        .is_file());
    assert!(home
        .path()
        .join(".local/share/man/man1/kopt-analyze.1")
        .is_file());
}
