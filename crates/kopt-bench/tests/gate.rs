//! The correctness gate on files, as `kopt compare` and `kopt bench --check`
//! read them: inputs that used to pass when they must not.

use std::path::{Path, PathBuf};

use kopt_bench::{compare_tensors, CompareReport};
use kopt_ingest::tensor::{npy_bytes, read_tensors, safetensors_bytes, Tensor};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn read(p: &Path) -> Vec<Tensor> {
    read_tensors(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn gate(r: &Path, c: &Path) -> CompareReport {
    compare_tensors(&read(r), &read(c), None, false)
}

/// The gate with a changed dtype allowed (`--allow-dtype-change`).
fn gate_allowing_dtypes(r: &Path, c: &Path) -> CompareReport {
    let g = kopt_bench::Gate {
        allow_dtype_change: true,
        ..kopt_bench::Gate::default()
    };
    kopt_bench::compare_tensors_gate(&read(r), &read(c), &g)
}

fn read_err(p: &Path) -> String {
    let e = read_tensors(p).expect_err("an unreadable file").to_string();
    assert!(e.starts_with(&p.display().to_string()), "{e}");
    e
}

#[test]
fn an_empty_safetensors_against_itself_fails_nothing_compared() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "empty.safetensors", &safetensors_bytes("{}", &[]));
    let r = gate(&p, &p);
    assert!(!r.passed);
    assert!(r.tensors.is_empty());
    assert_eq!(
        r.problems,
        vec!["nothing compared: neither file holds a tensor"]
    );
}

#[test]
fn an_overflowing_shape_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    // [2^62, 4] elements and 0 bytes: the product wraps to 0 without checks.
    for dtype in ["U8", "F32"] {
        let p = write(
            d.path(),
            "big.safetensors",
            &safetensors_bytes(
                &format!(
                    r#"{{"t":{{"dtype":"{dtype}","shape":[4611686018427387904,4],"data_offsets":[0,0]}}}}"#
                ),
                &[],
            ),
        );
        let e = read_err(&p);
        assert!(e.contains("tensor 't'") && e.contains("overflows"), "{e}");
    }
    let p = write(d.path(), "big.npy", &npy_bytes("|u1", &[1 << 62, 4], &[]));
    assert!(read_err(&p).contains("overflows"));
}

#[test]
fn invalid_dimensions_are_errors_naming_the_tensor() {
    let d = tempfile::tempdir().unwrap();
    for dim in ["-1", "\"x\""] {
        let p = write(
            d.path(),
            "dims.safetensors",
            &safetensors_bytes(
                &format!(
                    r#"{{"logits":{{"dtype":"F32","shape":[{dim},2],"data_offsets":[0,8]}}}}"#
                ),
                &[0; 8],
            ),
        );
        let e = read_err(&p);
        assert!(
            e.contains(&format!(
                "tensor 'logits': shape entry {dim} is not a non-negative integer"
            )),
            "{e}"
        );
    }
}

#[test]
fn an_all_nan_reference_fails_against_anything() {
    let d = tempfile::tempdir().unwrap();
    let nan = write(
        d.path(),
        "r.npy",
        &npy_bytes("<f4", &[4], &f32s(&[f32::NAN; 4])),
    );
    let finite = write(
        d.path(),
        "c.npy",
        &npy_bytes("<f4", &[4], &f32s(&[1.0, 2.0, 3.0, 4.0])),
    );
    let nan2 = write(
        d.path(),
        "c2.npy",
        &npy_bytes("<f4", &[4], &f32s(&[f32::NAN; 4])),
    );
    let r = gate(&nan, &finite);
    assert!(!r.passed);
    assert!(r.tensors[0].problems[0].contains("finite where the reference is NaN or Inf"));
    let r = gate(&nan, &nan2);
    assert!(!r.passed, "{r:?}");
    assert_eq!(r.tensors[0].compared, 0);
    assert!(r.tensors[0].problems[0].starts_with("nothing compared"));
    assert!(r.problems[0].starts_with("nothing compared"));
}

#[test]
fn two_npy_files_pair_whatever_their_names() {
    let d = tempfile::tempdir().unwrap();
    let v = f32s(&[1.0, -2.0, 0.5]);
    let a = write(d.path(), "ref.npy", &npy_bytes("<f4", &[3], &v));
    let b = write(d.path(), "out.npy", &npy_bytes("<f4", &[3], &v));
    let r = gate(&a, &b);
    assert!(r.passed, "{r:?}");
    assert_eq!(r.tensors[0].name, "ref");
}

#[test]
fn an_npy_pairs_with_a_safetensors_tensor_only_by_name() {
    let d = tempfile::tempdir().unwrap();
    let v = f32s(&[1.0, -2.0]);
    let npy = write(d.path(), "out.npy", &npy_bytes("<f4", &[2], &v));
    let one = |name: &str| {
        safetensors_bytes(
            &format!(r#"{{"{name}":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}}}"#),
            &v,
        )
    };
    // Same name: compared.
    let same = write(d.path(), "same.safetensors", &one("out"));
    assert!(gate(&npy, &same).passed);
    assert!(gate(&same, &npy).passed);
    // Another name: not paired, whatever the values.
    let other = write(d.path(), "other.safetensors", &one("logits"));
    let r = gate(&npy, &other);
    assert!(!r.passed);
    assert_eq!(
        r.tensors
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        vec!["logits", "out"]
    );
    assert!(
        r.problems[0].contains("a .npy pairs only with a tensor of its file's name"),
        "{:?}",
        r.problems
    );
    assert!(r.problems[1].starts_with("nothing compared"));
    // Several tensors against one .npy: a clear problem even when one matches.
    let many = write(
        d.path(),
        "many.safetensors",
        &safetensors_bytes(
            r#"{"out":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"aux":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
            &[v.clone(), v.clone()].concat(),
        ),
    );
    let r = gate(&npy, &many);
    assert!(!r.passed);
    assert!(
        r.problems[0].contains(
            "the reference is a .npy file (one tensor, 'out') and the candidate holds 2 tensors"
        ),
        "{:?}",
        r.problems
    );
}

#[test]
fn safetensors_tensors_pair_by_name_not_position() {
    let d = tempfile::tempdir().unwrap();
    let h = |a: &str, b: &str| {
        format!(
            r#"{{"{a}":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}},"{b}":{{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}}}"#
        )
    };
    let data = f32s(&[1.0, 2.0]);
    let r = write(
        d.path(),
        "r.safetensors",
        &safetensors_bytes(&h("x", "y"), &data),
    );
    // The same bytes under swapped names: x is 2.0 now.
    let c = write(
        d.path(),
        "c.safetensors",
        &safetensors_bytes(&h("y", "x"), &data),
    );
    let report = gate(&r, &c);
    assert!(!report.passed);
    assert!(report.tensors.iter().all(|t| !t.passed));
    // Other names entirely: nothing pairs.
    let c = write(
        d.path(),
        "z.safetensors",
        &safetensors_bytes(&h("p", "q"), &data),
    );
    let report = gate(&r, &c);
    assert!(!report.passed);
    assert_eq!(report.tensors.len(), 4);
    assert!(
        report.problems[0].contains("none pair up"),
        "{:?}",
        report.problems
    );
}

#[test]
fn overlapping_or_out_of_bounds_offsets_are_errors() {
    let d = tempfile::tempdir().unwrap();
    let h = |a: &str, b: &str| {
        format!(
            r#"{{"a":{{"dtype":"F32","shape":[2],"data_offsets":{a}}},"b":{{"dtype":"F32","shape":[2],"data_offsets":{b}}}}}"#
        )
    };
    let cases = [
        (h("[0,8]", "[4,12]"), 12, "'a' and 'b' overlap"),
        (
            h("[0,8]", "[8,16]"),
            12,
            "tensor 'b': data 8..16 lies past the end",
        ),
        (
            h("[0,8]", "[8,12]"),
            12,
            "hold 4 bytes, and shape [2] of f32 needs 8",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[]}}"#.to_string(),
            4,
            "tensor 'a': data_offsets must be [begin, end]",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}"#.to_string(),
            4,
            "tensor 'a': data_offsets must be [begin, end]",
        ),
    ];
    for (header, len, expected) in cases {
        let p = write(
            d.path(),
            "bad.safetensors",
            &safetensors_bytes(&header, &vec![0; len]),
        );
        let e = read_err(&p);
        assert!(e.contains(expected), "{header}: {e}");
    }
}

#[test]
fn npy_descr_empty_or_multibyte_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    for descr in ["", "é"] {
        let p = write(d.path(), "d.npy", &npy_bytes(descr, &[1], &[0; 4]));
        assert!(read_err(&p).contains("is not supported"));
    }
}

#[test]
fn the_report_round_trips_through_json() {
    let d = tempfile::tempdir().unwrap();
    let a = write(
        d.path(),
        "a.npy",
        &npy_bytes("<f4", &[2], &f32s(&[1.0, 2.0])),
    );
    let b = write(
        d.path(),
        "b.npy",
        &npy_bytes("<f4", &[2], &f32s(&[1.0, f32::NAN])),
    );
    let r = gate(&a, &b);
    let json = serde_json::to_string(&r).unwrap();
    let back: CompareReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    // A report written before `compared` and `problems` existed still reads.
    let old = r#"{"schema":"kopt/1","passed":true,"tensors":[{"name":"y","reference_dtype":"f32","candidate_dtype":"f32","reference_shape":[2],"candidate_shape":[2],"rel_l2":0.0,"max_abs":0.0,"tolerance":1e-5,"nan":[0,0],"inf":[0,0],"passed":true,"problems":[],"warnings":[]}]}"#;
    let old: CompareReport = serde_json::from_str(old).unwrap();
    assert_eq!((old.tensors[0].compared, old.problems.len()), (0, 0));
}

#[test]
fn dtypes_mix_and_convert() {
    let d = tempfile::tempdir().unwrap();
    let v = [1.0f32, -2.0, 0.5, 3.0];
    let r = write(d.path(), "out.npy", &npy_bytes("<f4", &[4], &f32s(&v)));
    // bf16 and f16 candidates within their tolerance.
    let bf16: Vec<u8> = v
        .iter()
        .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    for (dtype, bytes) in [
        ("BF16", bf16),
        (
            "F16",
            [0x3c00u16, 0xc000, 0x3800, 0x4200]
                .iter()
                .flat_map(|h| h.to_le_bytes())
                .collect(),
        ),
    ] {
        let c = write(
            d.path(),
            "c.safetensors",
            &safetensors_bytes(
                &format!(r#"{{"out":{{"dtype":"{dtype}","shape":[4],"data_offsets":[0,8]}}}}"#),
                &bytes,
            ),
        );
        // A changed dtype fails unless allowed.
        let report = gate(&r, &c);
        assert!(!report.passed, "{dtype}: {report:?}");
        assert!(report.tensors[0].problems[0].contains("dtype differs"));
        let report = gate_allowing_dtypes(&r, &c);
        assert!(report.passed, "{dtype}: {report:?}");
        assert_eq!(report.tensors[0].rel_l2, Some(0.0));
        assert!(report.tensors[0].warnings[0].contains("dtype differs"));
    }
    // Big-endian f8 against little-endian f4, integers exact, booleans.
    let be: Vec<u8> = v.iter().flat_map(|x| f64::from(*x).to_be_bytes()).collect();
    let c = write(d.path(), "be.npy", &npy_bytes(">f8", &[4], &be));
    assert!(gate_allowing_dtypes(&r, &c).passed);
    let i = write(d.path(), "i.npy", &npy_bytes("<i2", &[2], &[1, 0, 2, 0]));
    let j = write(d.path(), "j.npy", &npy_bytes("<i2", &[2], &[1, 0, 3, 0]));
    assert!(gate(&i, &i).passed);
    assert!(!gate(&i, &j).passed);
    let b = write(d.path(), "b.npy", &npy_bytes("|b1", &[3], &[1, 0, 1]));
    let b2 = write(d.path(), "b2.npy", &npy_bytes("|b1", &[3], &[1, 1, 1]));
    assert!(gate(&b, &b).passed);
    assert!(!gate(&b, &b2).passed);
}
