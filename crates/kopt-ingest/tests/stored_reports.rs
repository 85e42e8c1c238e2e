//! #39: a report kopt stored, read back, is held to the same finite,
//! plausible discipline as fresh input: an edited figure is an error that
//! names the file and the figure, not a bar or axis drawn from it.

use std::path::PathBuf;

fn fixture() -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/profile-module-h200/run/report.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_stored_report_as_kopt_wrote_it_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("report.json");
    std::fs::write(&p, fixture().to_string()).unwrap();
    kopt_ingest::inputs::read_kopt_report(&p).unwrap();
}

#[test]
fn implausible_figures_in_a_stored_report_are_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("report.json");
    let cases: [(&str, serde_json::Value, &str); 5] = [
        // A fifth hostile round: 2^64-5 launches summed to "5 launches".
        (
            "/kernels/0/launches",
            serde_json::json!(u64::MAX - 4),
            "kernels[0].launches = 18446744073709551611: a count past 2^53",
        ),
        (
            "/kernels/0/mean_ns",
            serde_json::json!(-5.0),
            "kernels[0].mean_ns = -5.0",
        ),
        (
            "/total_kernel_ns",
            serde_json::json!(1e308),
            "total_kernel_ns = 1e+308",
        ),
        (
            "/kernels/0/pct_of_total",
            serde_json::json!(1e9),
            "kernels[0].pct_of_total",
        ),
        (
            "/kernels/0/total_ns",
            serde_json::json!(-1.0),
            "kernels[0].total_ns",
        ),
    ];
    for (pointer, value, named) in cases {
        let mut v = fixture();
        *v.pointer_mut(pointer).unwrap() = value;
        std::fs::write(&p, v.to_string()).unwrap();
        let e = kopt_ingest::inputs::read_kopt_report(&p)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(named), "{pointer}: {e}");
        assert!(e.contains("report.json"), "{pointer}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
