//! CI's bounded fuzzing: each target replays its seed corpus and regression
//! inputs, then mutates them for `KOPT_FUZZ_SECS` seconds (default: 60 s
//! shared by all targets). A failure names the input file, the panic's
//! location and message, and the seed (`KOPT_FUZZ_SEED` repeats a run;
//! `KOPT_FUZZ_SEED=random` explores). Findings land in the target folder's
//! `tmp/kopt-fuzz/`.

use kopt_fuzz::driver::{self, Config};

#[global_allocator]
static ALLOC: kopt_fuzz::alloc::CountingAlloc = kopt_fuzz::alloc::CountingAlloc;

fn fuzz(name: &str) {
    let target = kopt_fuzz::target(name).expect("a known target");
    let secs = match std::env::var("KOPT_FUZZ_SECS") {
        Ok(s) => s.parse().expect("KOPT_FUZZ_SECS is a number of seconds"),
        Err(_) => 60.0 / kopt_fuzz::TARGETS.len() as f64,
    };
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("kopt-fuzz");
    let cfg = Config::new(target, secs, driver::seed_from_env(name), out);
    let report = driver::run(&cfg);
    if report.findings.is_empty() {
        eprintln!("{report}");
    }
    assert!(
        report.stats.seeds > 1,
        "{name}: no seed corpus in {}",
        driver::corpus_dir(name).display()
    );
    assert!(
        report.findings.is_empty(),
        "fuzzing found a failure:\n{report}"
    );
}

#[test]
fn fuzz_ncu_csv() {
    fuzz("ncu_csv");
}

#[test]
fn fuzz_kineto() {
    fuzz("kineto");
}

#[test]
fn fuzz_kineto_serde() {
    fuzz("kineto_serde");
}

#[test]
fn fuzz_kopt_trace() {
    fuzz("kopt_trace");
}

#[test]
fn fuzz_npy() {
    fuzz("npy");
}

#[test]
fn fuzz_safetensors() {
    fuzz("safetensors");
}

#[test]
fn fuzz_run_folder() {
    fuzz("run_folder");
}

#[test]
fn fuzz_rocprof() {
    fuzz("rocprof");
}

#[test]
fn fuzz_rocprofv3_json() {
    fuzz("rocprofv3_json");
}

#[test]
fn fuzz_rocpd() {
    fuzz("rocpd");
}

#[test]
fn fuzz_gzip() {
    fuzz("gzip");
}

#[test]
fn fuzz_demangle() {
    fuzz("demangle");
}

#[test]
fn every_target_has_a_test() {
    let this = include_str!("fuzz_ci.rs");
    for t in kopt_fuzz::TARGETS {
        assert!(
            this.contains(&format!("fn fuzz_{}()", t.name)),
            "{} has no test here",
            t.name
        );
    }
}

#[test]
fn fuzz_tune_space() {
    fuzz("tune_space");
}
