//! The wheel carries kopt's CUPTI tracer (`libkopt_tracer.so`) however it
//! is built (`maturin build`, `pip install crates/kopt-py`,
//! `scripts/build_wheel.sh`): this script builds the `kopt-tracer` cdylib
//! with a cargo of its own and copies it to `python/kopt/`, which maturin
//! packs (`[tool.maturin] include`). Without it, `profile_module` fell back
//! to ncu timing and lost the timeline.
//!
//! The nested cargo uses its own target folder beside the outer one (no
//! lock shared with the build that runs this script) and the same profile;
//! a debug build only fills a missing library.
//! `KOPT_PY_TRACER=skip` leaves the library out (a build that does not
//! make a wheel); `KOPT_PY_TRACER=/path/libkopt_tracer.so` copies that one.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dest = manifest.join("python/kopt/libkopt_tracer.so");
    let tracer_src = manifest.join("../kopt-tracer");
    println!("cargo:rerun-if-env-changed=KOPT_PY_TRACER");
    println!(
        "cargo:rerun-if-changed={}",
        tracer_src.join("src").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        tracer_src.join("Cargo.toml").display()
    );
    println!("cargo:rerun-if-changed={}", dest.display());
    match std::env::var("KOPT_PY_TRACER").ok().as_deref() {
        Some("skip") => return,
        Some(path) if !path.is_empty() => {
            copy(Path::new(path), &dest);
            return;
        }
        _ => {}
    }
    if !tracer_src.join("Cargo.toml").is_file() {
        // Built from a copy without the workspace (an sdist): nothing to build.
        println!(
            "cargo:warning=kopt-tracer's sources are not beside kopt-py: the wheel has no libkopt_tracer.so (set KOPT_PY_TRACER=/path/libkopt_tracer.so)"
        );
        return;
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/[<triple>/]<profile>/build/kopt-py-<hash>/out.
    let target = out_dir
        .ancestors()
        .find(|p| p.join("CACHEDIR.TAG").is_file())
        .map_or_else(|| out_dir.join("tracer"), Path::to_path_buf)
        .join("kopt-py-tracer");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(tracer_src.join("Cargo.toml"))
        .arg("--lib")
        .arg("--target-dir")
        .arg(&target);
    if release {
        cmd.arg("--release");
    }
    // The outer build's settings are not the tracer's (its own target
    // folder, no cross target, no flags meant for the Python module).
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if (k.starts_with("CARGO_") && k != "CARGO_HOME" && !k.starts_with("CARGO_NET"))
            || k == "RUSTFLAGS"
            || k == "RUSTC_WRAPPER"
            || k == "RUSTC_WORKSPACE_WRAPPER"
        {
            cmd.env_remove(k.as_ref());
        }
    }
    let status = cmd.status().expect("cargo runs");
    assert!(
        status.success(),
        "building kopt-tracer for the wheel failed"
    );
    let built = target
        .join(if release { "release" } else { "debug" })
        .join("libkopt_tracer.so");
    // A debug build (the workspace's tests, clippy) never replaces the
    // library a release build put there: the wheel carries the release one.
    if release || !dest.is_file() {
        copy(&built, &dest);
    }
}

fn copy(from: &Path, to: &Path) {
    let same = std::fs::read(from).ok() == std::fs::read(to).ok();
    if !same {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
    }
}
