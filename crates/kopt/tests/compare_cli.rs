//! `kopt compare` on generated arrays: planted NaN, planted 1e-2 error,
//! shape mismatch, constant output, bf16 through safetensors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kopt_ingest::tensor::npy_bytes;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    // A small LCG: fresh non-zero inputs, no dependency.
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn npy(dir: &Path, name: &str, shape: &[usize], v: &[f32]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, npy_bytes("<f4", shape, &f32s(v))).unwrap();
    p
}

/// `kopt compare`, run in the first input's folder (a temporary one), so the
/// history it records lands there and not in the source tree.
fn kopt(args: &[&Path], extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kopt"));
    if let Some(dir) = args.first().and_then(|p| p.parent()) {
        cmd.current_dir(dir);
    }
    cmd.arg("compare").args(args).args(extra).output().unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

#[test]
fn equal_arrays_pass() {
    let d = tempfile::tempdir().unwrap();
    let v = random(256, 1);
    let (r, c) = (
        npy(d.path(), "ref.npy", &[16, 16], &v),
        npy(d.path(), "out.npy", &[16, 16], &v),
    );
    let o = kopt(&[&r, &c], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("correctness: PASS"));
}

#[test]
fn planted_nan_fails_with_exit_3() {
    let d = tempfile::tempdir().unwrap();
    let v = random(256, 2);
    let mut bad = v.clone();
    bad[100] = f32::NAN;
    let o = kopt(
        &[
            &npy(d.path(), "r.npy", &[256], &v),
            &npy(d.path(), "c.npy", &[256], &bad),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o).contains("NaN or Inf where the reference is finite"),
        "{}",
        text(&o)
    );
}

#[test]
fn planted_one_percent_error() {
    let d = tempfile::tempdir().unwrap();
    let v = random(1024, 3);
    let off: Vec<f32> = v.iter().map(|x| x * 1.01).collect();
    let (r, c) = (
        npy(d.path(), "r.npy", &[1024], &v),
        npy(d.path(), "c.npy", &[1024], &off),
    );
    let o = kopt(&[&r, &c], &["--format", "json"]);
    assert_eq!(o.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rel = doc["tensors"][0]["rel_l2"].as_f64().unwrap();
    assert!((rel - 0.01).abs() < 1e-4, "{rel}");
    // bf16-level tolerance accepts it.
    assert_eq!(kopt(&[&r, &c], &["--tol", "2e-2"]).status.code(), Some(0));
}

#[test]
fn shape_mismatch_and_constant_output() {
    let d = tempfile::tempdir().unwrap();
    let v = random(12, 4);
    let o = kopt(
        &[
            &npy(d.path(), "r.npy", &[3, 4], &v),
            &npy(d.path(), "c.npy", &[4, 3], &v),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o).contains("shape differs"));
    let z = vec![0.0f32; 12];
    let o = kopt(
        &[
            &npy(d.path(), "z1.npy", &[12], &z),
            &npy(d.path(), "z2.npy", &[12], &z),
        ],
        &[],
    );
    assert!(text(&o).contains("all zero"), "{}", text(&o));
}

#[test]
fn bf16_safetensors_against_f32_reference() {
    let d = tempfile::tempdir().unwrap();
    let v = random(64, 5);
    let bf16: Vec<u8> = v
        .iter()
        .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let header = format!(
        r#"{{"out":{{"dtype":"BF16","shape":[64],"data_offsets":[0,{}]}}}}"#,
        bf16.len()
    );
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header.as_bytes());
    st.extend_from_slice(&bf16);
    let c = d.path().join("c.safetensors");
    std::fs::write(&c, st).unwrap();
    let r = npy(d.path(), "out.npy", &[64], &v);
    // A changed dtype fails (REVERT) unless allowed (#27).
    let o = kopt(&[&r, &c], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("dtype differs"));
    let o = kopt(&[&r, &c], &["--allow-dtype-change"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("dtype differs"));
}

#[test]
fn sign_flipped_elements_fail_element_wise() {
    // 10 of 11 elements sign-flipped under one large element: relative L2
    // 6.3e-3, within a 1e-2 tolerance: this passed. Element-wise fails it.
    let d = tempfile::tempdir().unwrap();
    let mut v = vec![1.0f32; 11];
    v[0] = 1000.0;
    let flipped: Vec<f32> = v
        .iter()
        .enumerate()
        .map(|(i, x)| if i == 0 { *x } else { -x })
        .collect();
    let r = npy(d.path(), "r.npy", &[11], &v);
    let c = npy(d.path(), "c.npy", &[11], &flipped);
    let o = kopt(&[&r, &c], &["--tol", "1e-2"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("10 of 11 element(s) (90.91%)"),
        "{}",
        text(&o)
    );
    let o = kopt(&[&r, &c], &["--tol", "1e-2", "--atol", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn unreadable_input_is_an_error_not_a_verdict() {
    let d = tempfile::tempdir().unwrap();
    let junk = d.path().join("junk.npy");
    std::fs::write(&junk, b"\x93NUMPY\x01\x00\xff\xff{'descr'").unwrap();
    let v = npy(d.path(), "r.npy", &[2], &[1.0, 2.0]);
    let o = kopt(&[&v, &junk], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("junk.npy"), "{}", text(&o));
}

/// A fifth hostile round: `compare -o .kopt/history.db` replaced the
/// history database with the text report. kopt's own records are never
/// an output.
#[test]
fn an_output_onto_kopts_records_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let v = random(16, 3);
    let a = npy(d.path(), "a.npy", &[16], &v);
    let b = npy(d.path(), "b.npy", &[16], &v);
    assert!(kopt(&[&a, &b], &[]).status.success());
    let db = d.path().join(".kopt/history.db");
    let before = std::fs::read(&db).unwrap();
    for out in [".kopt/history.db", "OPTIMIZATIONS.md"] {
        let o = kopt(&[&a, &b], &["-o", out]);
        assert_eq!(o.status.code(), Some(2), "{out}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("kopt's own record"),
            "{out}"
        );
    }
    assert!(!d.path().join("OPTIMIZATIONS.md").exists());
    // The refused run recorded nothing either: the database is as it was
    // after the first comparison.
    assert_eq!(std::fs::read(&db).unwrap().len(), before.len());
}
