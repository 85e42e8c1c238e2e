//! `kopt tune` on CPU workloads whose times are known: a script prints
//! `{"kopt_sample_ns": N}` as a function of its parameters (best at
//! B=128, W=4) and copies a good or a wrong output for `--check`.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A little-endian f32 `.npy` file.
fn npy(values: &[f32]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// The workload: `sh work.sh B W OUT`. B=256,W=8 is the fastest of all but
/// writes a wrong output; `slow` sleeps in every run.
fn setup(dir: &Path) {
    std::fs::write(dir.join("good.npy"), npy(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    std::fs::write(dir.join("bad.npy"), npy(&[1.0, 2.0, 3.0, 9.0])).unwrap();
    std::fs::write(
        dir.join("work.sh"),
        r#"B=$1; W=$2; OUT=$3
here=$(dirname "$0")
ns=$(( (B - 128) * (B - 128) * 4 + (W - 4) * (W - 4) * 5000 + 100000 ))
if [ "$B" = 256 ] && [ "$W" = 8 ]; then ns=50000; cp "$here/bad.npy" "$OUT"; else cp "$here/good.npy" "$OUT"; fi
[ -n "$SLOW" ] && sleep "$SLOW"
for i in 1 2 3; do echo "{\"kopt_sample_ns\": $((ns + i))}"; done
"#,
    )
    .unwrap();
}

/// `kopt tune show` on the test's database.
fn show(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["tune", "show", "--db", "h.db"])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn kopt(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kopt"));
    c.arg("tune")
        .args(["--db", "h.db", "--min-time", "0", "--noise-target", "0.01"])
        .args(args)
        .current_dir(dir)
        .env("KOPT_TRACER", "/nonexistent/libkopt_tracer.so")
        .env_remove("CUDA_VISIBLE_DEVICES");
    c
}

const SWEEP: [&str; 6] = [
    "-p",
    "B=32..512 x2",
    "-p",
    "W=1,2,4,8",
    "--check",
    "out.npy",
];

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn sweep(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend_from_slice(extra);
    args.extend(["-f", "json", "--", "sh", "work.sh", "{B}", "{W}", "{CHECK}"]);
    json(&kopt(dir, &args).output().unwrap())
}

fn trial<'a>(r: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"] == label)
        .unwrap_or_else(|| panic!("no trial {label}"))
}

#[test]
fn grid_and_halving_find_the_best_and_reject_the_wrong_output() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let grid = sweep(d.path(), &["--strategy", "grid", "--key", "grid"]);
    assert_eq!(grid["strategy"], "grid");
    assert_eq!(grid["trials"].as_array().unwrap().len(), 20);
    assert_eq!(grid["winner"]["label"], "B=128,W=4");
    assert_eq!(grid["winner"]["verdict"]["kind"], "KEEP");
    let wrong = trial(&grid, "B=256,W=8");
    assert_eq!(wrong["status"], "rejected");
    assert_eq!(wrong["correct"], false);
    assert!(
        wrong["reason"].as_str().unwrap().contains("differs"),
        "{wrong}"
    );
    assert_eq!(trial(&grid, "B=128,W=4")["correct"], true);

    // Two workers: outputs that come in before the baseline's wait for it.
    let halving = sweep(
        d.path(),
        &["--strategy", "halving", "--key", "halving", "--gpus", "0,1"],
    );
    assert_eq!(halving["winner"]["label"], "B=128,W=4");
    assert_eq!(trial(&halving, "B=256,W=8")["status"], "rejected");
    let (g, h) = (
        grid["trial_samples"].as_u64().unwrap(),
        halving["trial_samples"].as_u64().unwrap(),
    );
    let (gf, hf) = (
        grid["final_samples"].as_u64().unwrap(),
        halving["final_samples"].as_u64().unwrap(),
    );
    println!("20 configs: grid {g} trial samples (+{gf} final), halving {h} (+{hf} final)");
    assert!(h < g, "halving {h} vs grid {g}");
    assert!(h + hf < g + gf);
}

#[test]
fn a_second_run_hits_the_cache_for_every_trial() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let first = sweep(d.path(), &[]);
    assert_eq!(first["cached_trials"], 0);
    assert_eq!(first["measured_trials"], 20);
    let t = Instant::now();
    let second = sweep(d.path(), &[]);
    let took = t.elapsed();
    println!(
        "second run: {:.3} s, {} measured",
        took.as_secs_f64(),
        second["measured_trials"]
    );
    assert_eq!(second["measured_trials"], 0);
    assert_eq!(second["measured_samples"], 0);
    assert_eq!(second["cached_trials"], 20);
    assert_eq!(second["final_cached"], true);
    assert_eq!(second["winner"]["label"], first["winner"]["label"]);
    assert!(took < Duration::from_secs(5), "{took:?}");
    let fresh = sweep(d.path(), &["--fresh"]);
    assert_eq!(fresh["measured_trials"], 20);

    let o = show(d.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("B=128,W=4") && text.contains("of 20 cached trials"),
        "{text}"
    );
    // The sweep's run in the history reads back as its report.
    let h = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["history", "--db", "h.db", "show", "1"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&h.stdout);
    assert!(h.status.success(), "{}", String::from_utf8_lossy(&h.stderr));
    assert!(
        text.contains("(tune)") && text.contains("B=128,W=4"),
        "{text}"
    );
    assert!(!text.contains("cannot read back"), "{text}");
    // Two sweeps side by side: each config's median time.
    let diff = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["history", "--db", "h.db", "diff", "1", "2"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff.status.success(),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(text.contains("B=128,W=4"), "{text}");
}

#[test]
fn a_killed_run_loses_no_finished_trial() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let args = [
        "-p",
        "B=32..512 x2",
        "-p",
        "W=1,2,4,8",
        "--min-samples",
        "3",
        "--warmup",
        "0",
        "--",
        "sh",
        "work.sh",
        "{B}",
        "{W}",
        "/dev/null",
    ];
    let mut child = kopt(d.path(), &args)
        .env("SLOW", "0.2")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until some trials are cached, then SIGKILL.
    let cached = |d: &Path| -> usize {
        let o = show(d);
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        t.split("of ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let start = Instant::now();
    let mut before = 0;
    while before < 3 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
        before = cached(d.path());
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(before >= 3, "{before} trials cached before the kill");
    let after = cached(d.path());
    assert!(after >= before, "{after} < {before}");
    let mut args2: Vec<&str> = args[..args.len() - 6].to_vec();
    args2.extend(["-f", "json"]);
    args2.extend_from_slice(&args[args.len() - 6..]);
    let r = json(&kopt(d.path(), &args2).env("SLOW", "0").output().unwrap());
    println!(
        "killed after {before} trials: the rerun took {} from the cache, measured {}",
        r["cached_trials"], r["measured_trials"]
    );
    assert!(r["cached_trials"].as_u64().unwrap() as usize >= after);
    assert_eq!(
        r["cached_trials"].as_u64().unwrap() + r["measured_trials"].as_u64().unwrap(),
        20
    );
}

#[test]
fn several_gpus_never_share_one() {
    let d = tempfile::tempdir().unwrap();
    // A trial fails when another holds its "GPU" (mkdir is atomic).
    std::fs::create_dir(d.path().join("locks")).unwrap();
    std::fs::write(
        d.path().join("gpu.sh"),
        r#"lock="$(dirname "$0")/locks/gpu$CUDA_VISIBLE_DEVICES"
mkdir "$lock" || { echo "GPU $CUDA_VISIBLE_DEVICES busy" >&2; exit 1; }
sleep 0.02
echo "{\"kopt_sample_ns\": $(( $1 * 1000 + $2 ))}"
rmdir "$lock"
"#,
    )
    .unwrap();
    let o = kopt(
        d.path(),
        &[
            "--gpus",
            "0,1",
            "-p",
            "A=1..6",
            "-p",
            "C=1,2",
            "--min-samples",
            "3",
            "-f",
            "json",
            "--",
            "sh",
            "gpu.sh",
            "{A}",
            "{C}",
        ],
    )
    .output()
    .unwrap();
    let r = json(&o);
    assert_eq!(r["gpus"], serde_json::json!(["0", "1"]));
    let trials = r["trials"].as_array().unwrap();
    assert!(
        trials.iter().all(|t| t["status"] == "ok"),
        "{}",
        serde_json::to_string_pretty(trials).unwrap()
    );
    for g in ["0", "1"] {
        assert!(trials.iter().any(|t| t["gpu"] == g), "GPU {g} unused");
    }
    assert_eq!(r["winner"]["label"], "A=1,C=1");
}

#[test]
fn emit_triton_prints_the_winning_config() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let o = kopt(
        d.path(),
        &[
            "-p",
            "BLOCK_M=64,128",
            "-p",
            "num_warps=4,8",
            "--emit",
            "triton",
            "--",
            "sh work.sh {BLOCK_M} {num_warps} /dev/null",
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "triton.Config({\"BLOCK_M\": 128}, num_warps=4),\n"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("winner: BLOCK_M=128,num_warps=4"));
}

#[test]
fn usage_errors_name_the_flag() {
    let d = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (&["-p", "B=1,2", "--", "echo"][..], "{B}"),
        (&["--", "echo {B}"][..], "no parameters"),
        (
            &["-p", "B=1,2", "--constraint", "B >", "--", "echo {B}"][..],
            "constraint",
        ),
        (&["-p", "B=1;2", "--", "echo {B}"][..], "plain token"),
        (
            &["-p", "B=1,2", "--strategy", "random", "--", "echo {B}"][..],
            "--trials",
        ),
        (
            &["-p", "B=1,2", "--baseline", "C=1", "--", "echo {B}"][..],
            "--baseline",
        ),
        (
            &[
                "-p",
                "B=1,2",
                "--space",
                "/nonexistent.toml",
                "--",
                "echo {B}",
            ][..],
            "nonexistent",
        ),
    ] {
        let o = kopt(d.path(), args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// #39: the history database travels with a repository. Samples of -1 s
/// or 1e-10 s planted in the tune cache (or in a cached final comparison)
/// made the slowest config the winner of `tune` and `tune show`.
/// Such rows are ignored with a note and measured again, never ranked.
#[test]
fn a_planted_tune_cache_does_not_change_the_winner() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("w.sh"),
        "for i in 1 2 3; do echo \"{\\\"kopt_sample_ns\\\": $(($1 * 100000 + i))}\"; done\n",
    )
    .unwrap();
    let run = |d: &Path| {
        json(
            &kopt(
                d,
                &[
                    "-p",
                    "A=2,1,3,4",
                    "--top",
                    "1",
                    "-f",
                    "json",
                    "--",
                    "sh",
                    "w.sh",
                    "{A}",
                ],
            )
            .output()
            .unwrap(),
        )
    };
    let honest = run(d.path());
    assert_eq!(honest["winner"]["label"], "A=1");
    for planted in ["[-1.0,-1.0,-1.0]", "[1e-10,1e-10,1e-10]"] {
        let c = rusqlite::Connection::open(d.path().join("h.db")).unwrap();
        c.execute(
            "UPDATE tune_trials SET samples_json = ?1, median_s = -1.0 WHERE params LIKE '%\"4\"%'",
            [planted],
        )
        .unwrap();
        drop(c);
        let show_before = String::from_utf8_lossy(&show(d.path()).stdout).to_string();
        assert!(show_before.contains("A=1"), "{planted}: {show_before}");
        let r = run(d.path());
        assert_eq!(r["winner"]["label"], "A=1", "{planted}: {r}");
        assert_eq!(trial(&r, "A=4")["median_s"], 0.000400002, "{planted}: {r}");
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("trial A=4 was ignored and measured again: sample 1 is"),
            "{planted}: {notes}"
        );
        assert!(notes.contains("between 1 ns and 1e13 ns"), "{notes}");
    }
    // A planted sample within the bound (1 ns is one) cannot be told from
    // a measured one: the final comparison re-times it, finds it 4e5 times
    // slower, and the configs are ranked again with that timing.
    {
        let c = rusqlite::Connection::open(d.path().join("h.db")).unwrap();
        c.execute(
            "UPDATE tune_trials SET samples_json = '[1e-9,1e-9,1e-9]' WHERE params LIKE '%\"4\"%'",
            [],
        )
        .unwrap();
    }
    let r = run(d.path());
    assert_eq!(r["winner"]["label"], "A=1", "{r}");
    assert_eq!(trial(&r, "A=4")["median_s"], 0.000400002, "{r}");
    assert!(
        r["notes"]
            .to_string()
            .contains("trial A=4 (median 1e-9 s) was re-timed at 0.000400002 s"),
        "{r}"
    );
    let shown = String::from_utf8_lossy(&show(d.path()).stdout).to_string();
    assert!(shown.contains("winner A=1"), "{shown}");

    // The final comparison of the baseline and A=1, forged: a sample out of
    // bounds is ignored; figures over honest samples are decided again.
    let final_of = |d: &Path| -> serde_json::Value {
        let c = rusqlite::Connection::open(d.join("h.db")).unwrap();
        let text: String = c
            .query_row(
                "SELECT report_json FROM tune_finals WHERE instr(candidates, '4') = 0",
                [],
                |r| r.get(0),
            )
            .unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let plant_final = |d: &Path, f: &serde_json::Value| {
        let c = rusqlite::Connection::open(d.join("h.db")).unwrap();
        c.execute(
            "UPDATE tune_finals SET report_json = ?1 WHERE instr(candidates, '4') = 0",
            [f.to_string()],
        )
        .unwrap();
    };
    let honest_final = final_of(d.path());
    let mut forged = honest_final.clone();
    forged["variants"][0]["values_s"] = serde_json::json!([-1.0, -1.0]);
    plant_final(d.path(), &forged);
    let r = run(d.path());
    assert_eq!(r["final_cached"], false, "{r}");
    assert!(
        r["notes"]
            .to_string()
            .contains("final comparison was ignored and measured again: A=2 has a sample of -1 s"),
        "{r}"
    );
    let mut forged = final_of(d.path());
    forged["variants"][1]["median_s"] = serde_json::json!(1e-9);
    forged["variants"][1]["speedup_vs_first"] = serde_json::json!(1e6);
    plant_final(d.path(), &forged);
    let r = run(d.path());
    assert_eq!(r["final_cached"], true, "{r}");
    let fin = &r["final_comparison"]["variants"][1];
    assert_eq!(fin["median_s"], 0.000100002, "{fin}");
    assert!(fin["speedup_vs_first"].as_f64().unwrap() < 3.0, "{fin}");
}
