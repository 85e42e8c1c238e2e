//! `kopt-fuzz`: the stable-Rust fuzz driver from the command line.
//!
//! ```text
//! kopt-fuzz list
//! kopt-fuzz run [--secs N] [--seed S|random] [--out DIR] [TARGET...]
//! kopt-fuzz replay TARGET FILE...
//! ```
//!
//! `run` fuzzes each target (all by default) for N seconds (default 60) and
//! prints one line per target; it exits 1 if any finding was made. `replay`
//! runs files through a target and says of each whether it panicked, also
//! where a library inside the target caught the panic (libFuzzer aborts on
//! those); it exits 1 if any did.

use std::path::PathBuf;
use std::process::ExitCode;

use kopt_fuzz::driver::{self, Config};

#[global_allocator]
static ALLOC: kopt_fuzz::alloc::CountingAlloc = kopt_fuzz::alloc::CountingAlloc;

fn usage() -> ExitCode {
    eprintln!(
        "usage: kopt-fuzz list\n       kopt-fuzz run [--secs N] [--seed S|random] [--out DIR] [TARGET...]\n       kopt-fuzz replay TARGET FILE..."
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("list") => {
            for t in kopt_fuzz::TARGETS {
                println!("{}", t.name);
            }
            ExitCode::SUCCESS
        }
        Some("replay") => replay(&args[1..]),
        Some("run") => run(&args[1..]),
        _ => usage(),
    }
}

fn replay(args: &[String]) -> ExitCode {
    let Some(target) = args.first().and_then(|n| kopt_fuzz::target(n)) else {
        return usage();
    };
    let mut panicked = false;
    for path in &args[1..] {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{path}: {e}");
                return ExitCode::from(2);
            }
        };
        let r = driver::replay(&target, &data);
        let head = format!(
            "{path}: {} in {:.3} s, heap growth {} B ({} B input)",
            if r.parsed { "parsed" } else { "rejected" },
            r.secs,
            r.heap_growth,
            data.len()
        );
        match &r.panic {
            None => println!("{head}, no panic"),
            Some((text, fate)) => {
                panicked = true;
                let how = match fate {
                    driver::PanicFate::Escaped => "a panic escaped the target",
                    driver::PanicFate::CaughtInside => {
                        "a panic that a library caught inside the target (libFuzzer aborts on it)"
                    }
                };
                println!("{head}, {how}: {text}");
                for f in &r.frames {
                    println!("    {f}");
                }
            }
        }
    }
    if panicked {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn run(args: &[String]) -> ExitCode {
    let mut secs = 60.0;
    let mut out = std::env::temp_dir().join("kopt-fuzz");
    let mut seed: Option<String> = None;
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--secs" => match it.next().and_then(|s| s.parse().ok()) {
                Some(s) => secs = s,
                None => return usage(),
            },
            "--out" => match it.next() {
                Some(d) => out = PathBuf::from(d),
                None => return usage(),
            },
            "--seed" => match it.next() {
                Some(s) => seed = Some(s.clone()),
                None => return usage(),
            },
            name => names.push(name.to_string()),
        }
    }
    if let Some(s) = &seed {
        std::env::set_var("KOPT_FUZZ_SEED", s);
    }
    let targets: Vec<_> = if names.is_empty() {
        kopt_fuzz::TARGETS.to_vec()
    } else {
        let mut v = Vec::new();
        for n in &names {
            match kopt_fuzz::target(n) {
                Some(t) => v.push(t),
                None => {
                    eprintln!("unknown target {n}; `kopt-fuzz list` names them");
                    return ExitCode::from(2);
                }
            }
        }
        v
    };
    let mut failed = false;
    for t in targets {
        let cfg = Config::new(t, secs, driver::seed_from_env(t.name), out.clone());
        let report = driver::run(&cfg);
        println!("{report}");
        failed |= !report.findings.is_empty();
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
