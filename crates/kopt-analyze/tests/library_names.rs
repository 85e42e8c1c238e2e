//! fixtures/h100-probe holds one workload captured by ncu (ncu_raw.csv) and
//! by torch.profiler (torch_trace.json): the two demangle names differently
//! (`<unnamed>::` and shortened `at::` against `(anonymous namespace)::`
//! and `at::native::`), and each kernel must read as the same library
//! kernel from both.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kopt_analyze::library::classify;
use kopt_ingest::{profile_from_trace, read_kineto, read_ncu_csv};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/h100-probe")
        .join(rel)
}

fn families(names: impl Iterator<Item = String>) -> BTreeMap<String, String> {
    names
        .map(|n| {
            let c = classify(&n).map(|f| format!("{} {}", f.library, f.family.as_str()));
            (
                kopt_model::kernel_function_name(&n),
                c.unwrap_or_else(|| "-".into()),
            )
        })
        .collect()
}

#[test]
fn ncu_and_the_trace_classify_each_kernel_alike() {
    let ncu = read_ncu_csv(&fixture("ncu_raw.csv")).unwrap();
    let ncu = families(ncu.launches.into_iter().map(|l| l.name));
    let trace = profile_from_trace(
        read_kineto(&fixture("torch_trace.json")).unwrap(),
        "torch_trace.json",
    );
    let trace = families(trace.launches.into_iter().map(|l| l.name));
    let mut both = 0;
    for (f, fam) in &ncu {
        // Every kernel of this workload is PyTorch's or cuBLAS's.
        assert_ne!(fam, "-", "{f}: not recognised from ncu");
        if let Some(t) = trace.get(f) {
            assert_eq!(fam, t, "{f}");
            both += 1;
        }
    }
    assert!(both >= 8, "{both} kernels in both: {ncu:?} / {trace:?}");
    for (f, fam) in &trace {
        assert_ne!(fam, "-", "{f}: not recognised from the trace");
    }
}
