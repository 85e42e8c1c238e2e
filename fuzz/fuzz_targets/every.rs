//! Every target in one binary, for a machine without a Rust toolchain:
//! one file to carry instead of one per target. `KOPT_FUZZ_TARGET` names
//! the target it runs (`scripts/fuzz/run_all.sh` with `FUZZ_EVERY`).
#![no_main]

use std::sync::OnceLock;

static TARGET: OnceLock<kopt_fuzz::Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(
    init: {
        let name = std::env::var("KOPT_FUZZ_TARGET").unwrap_or_default();
        match kopt_fuzz::target(&name) {
            Some(t) => {
                let _ = TARGET.set(t);
            }
            None => {
                let names: Vec<&str> = kopt_fuzz::TARGETS.iter().map(|t| t.name).collect();
                eprintln!("KOPT_FUZZ_TARGET={name:?} is not one of {}", names.join(", "));
                std::process::exit(2);
            }
        }
    },
    |data: &[u8]| {
        if let Some(t) = TARGET.get() {
            (t.run)(data);
        }
    }
);
