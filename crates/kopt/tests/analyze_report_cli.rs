//! `kopt analyze report.json`: kopt's own JSON output read back and
//! re-rendered in every format, with a note that it was not analysed again;
//! another schema version, another kind of kopt document, a report mixed
//! with other inputs and one past the size budget are one-line errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn kopt(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("kopt runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `kopt analyze INPUT -f json` written to `dir/report.json`.
fn report_of(input: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("report.json");
    let o = kopt(
        &[
            "analyze",
            input.to_str().unwrap(),
            "-f",
            "json",
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    out
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

/// A report re-rendered says the same as the analysis that wrote it, in
/// every format, plus one note that it was not analysed again.
#[test]
fn a_report_is_rerendered_in_every_format() {
    let d = tempfile::tempdir().unwrap();
    let csv = fixture("labeled-suite-h100/ncu_raw_base.csv");
    let report = report_of(&csv, d.path());
    let r = report.to_str().unwrap();
    let (orig, again) = (
        kopt(&["analyze", csv.to_str().unwrap(), "-f", "json"], &[]),
        kopt(&["analyze", r, "-f", "json"], &[]),
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let (mut a, mut b) = (json(&orig), json(&again));
    let notes = |v: &mut serde_json::Value| -> Vec<String> {
        let n = v["notes"].take();
        serde_json::from_value(n).unwrap()
    };
    let (na, nb) = (notes(&mut a), notes(&mut b));
    assert_eq!(a, b, "the diagnosis changed on the way back");
    assert_eq!(&nb[..na.len()], &na[..]);
    assert_eq!(nb.len(), na.len() + 1);
    let note = nb.last().unwrap();
    assert!(
        note.contains("Re-rendered")
            && note.contains("nothing was analysed again")
            && note.contains(r),
        "{note}"
    );
    // Terminal, Markdown and HTML: the same table as the original's, and the note.
    for format in ["term", "md", "html"] {
        let orig = kopt(
            &[
                "analyze",
                csv.to_str().unwrap(),
                "-f",
                format,
                "--width",
                "120",
            ],
            &[],
        );
        let again = kopt(&["analyze", r, "-f", format, "--width", "120"], &[]);
        assert_eq!(again.status.code(), Some(0), "{format}: {}", text(&again));
        let (o, g) = (
            String::from_utf8_lossy(&orig.stdout),
            String::from_utf8_lossy(&again.stdout),
        );
        assert!(g.contains("Re-rendered from kopt"), "{format}: {g}");
        for line in o
            .lines()
            .filter(|l| l.contains("kopt_transpose_smem_naive"))
        {
            assert!(g.contains(line), "{format}: {line:?} missing");
        }
    }
    // A run folder's report.json, as `kopt profile` wrote it.
    let run_report = fixture("profile-module-h200/run/report.json");
    let o = kopt(&["analyze", run_report.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn other_versions_documents_and_mixes_are_one_line_errors() {
    let d = tempfile::tempdir().unwrap();
    let csv = fixture("labeled-suite-h100/ncu_raw_base.csv");
    let report = report_of(&csv, d.path());
    let original = std::fs::read_to_string(&report).unwrap();
    let write = |name: &str, body: &[u8]| {
        let p = d.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let newer = write(
        "newer.json",
        original.replacen("\"kopt/1\"", "\"kopt/2\"", 1).as_bytes(),
    );
    let bench = write(
        "bench.json",
        b"{\"schema\": \"kopt/1\", \"threshold\": 0.05, \"variants\": []}",
    );
    let truncated = write("cut.json", &original.as_bytes()[..original.len() / 2]);
    let wrong_type = write(
        "wrong.json",
        b"{\"schema\": \"kopt/1\", \"kernels\": \"none\"}",
    );
    // Past its size budget, the report's own size is what is suggested
    // (four times the budget, 4000, was still under it).
    let needed = format!("KOPT_REPORT_MAX_BYTES={}", original.len());
    assert!(original.len() > 4000);
    // (inputs, environment, exit code, what the error says)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, i32, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![newer.to_str().unwrap()],
            vec![],
            1,
            "schema kopt/2, and this kopt reads kopt/1",
        ),
        (vec![bench.to_str().unwrap()], vec![], 1, "a bench report"),
        (
            vec![truncated.to_str().unwrap()],
            vec![],
            1,
            "not a readable",
        ),
        (
            vec![wrong_type.to_str().unwrap()],
            vec![],
            1,
            "not a readable diagnosis",
        ),
        (
            vec![report.to_str().unwrap(), csv.to_str().unwrap()],
            vec![],
            1,
            "re-rendered alone",
        ),
        (
            vec![report.to_str().unwrap()],
            vec![("KOPT_REPORT_MAX_BYTES", "1000")],
            1,
            &needed,
        ),
        (
            vec![report.to_str().unwrap(), "--", "true"],
            vec![],
            2,
            "kopt's own report",
        ),
    ];
    for (inputs, env, code, expect) in cases {
        let mut args = vec!["analyze"];
        args.extend(inputs.iter().copied());
        let o = kopt(&args, &env);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(
            err.starts_with("kopt: error: ") && err.lines().count() == 1 && err.contains(expect),
            "{args:?}: {err}"
        );
    }
}
