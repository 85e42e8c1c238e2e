//! Hardening, round two (#27): inputs crafted to cost far more than their
//! size (memory and time bombs) and files of other runs. Each one failed
//! before its fix: ran out of memory, ran for minutes, or was merged.

use std::time::{Duration, Instant};

use kopt_ingest::{parse_kopt_trace, read_kopt_trace_set};

/// A malformed mangled name whose template arguments nest literals of
/// template types `levels` deep (`_Z1hIL1fIL1fIL...1g0EEE0EEE...0EEv`):
/// cpp_demangle backtracks over each level about three times and keeps the
/// failed alternatives' substitutions.
fn nested_literal_name(levels: usize) -> String {
    let mut t = String::from("1g");
    for _ in 0..levels {
        t = format!("1fIL{t}0EEE");
    }
    format!("_Z1hIL{t}0EEv")
}

#[test]
fn a_kernel_name_nesting_template_literals_is_kept_mangled_quickly() {
    // 10 levels took 1.9 s and 22 MB in a debug build, 16 more than 21 GB.
    for levels in [8, 10, 16, 40] {
        let name = nested_literal_name(levels);
        let trace = format!(
            "{{\"t\":\"process\",\"pid\":1}}\n{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":10,\"e\":20,\"c\":1}}\n{{\"t\":\"end\",\"records\":1,\"dropped\":0}}\n"
        );
        let started = Instant::now();
        let t = parse_kopt_trace(&trace, "bomb.jsonl").unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{levels} levels: {:?}",
            started.elapsed()
        );
        assert_eq!(t.timeline.activities[0].name, name);
    }
    // 16 levels: the 535-byte trace of the report. The name stays mangled
    // and the source says why.
    let name = nested_literal_name(16);
    let trace = format!(
        "{{\"t\":\"process\",\"pid\":1}}\n{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":10,\"e\":20,\"c\":1}}\n"
    );
    let t = parse_kopt_trace(&trace, "bomb.jsonl").unwrap();
    assert_eq!(t.names_left_mangled, 1, "{}", t.source_format());
    assert!(
        t.source_format().contains("kept mangled"),
        "{}",
        t.source_format()
    );
}

#[test]
fn a_name_repeated_in_every_record_is_demangled_once() {
    // 20,000 records of one slow-to-reject name: demangled once, not 20,000 times.
    let name = nested_literal_name(7);
    let mut trace = String::from("{\"t\":\"process\",\"pid\":1}\n");
    for i in 0..20_000u64 {
        let s = 100 + i * 10;
        trace.push_str(&format!(
            "{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":{s},\"e\":{},\"c\":{}}}\n",
            s + 5,
            i + 1
        ));
    }
    let started = Instant::now();
    let t = parse_kopt_trace(&trace, "many.jsonl").unwrap();
    assert_eq!(t.timeline.activities.len(), 20_000);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn real_kernel_names_still_demangle() {
    for (mangled, want) in [
        ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
        (
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, (unsigned long)1> >(int, at::native::FillFunctor<float>, std::array<char*, (unsigned long)1>)",
        ),
    ] {
        let (got, over) = kopt_ingest::kopt_trace::demangle_bounded(mangled);
        assert!(!over);
        assert_eq!(got, want);
    }
}

#[test]
fn trace_files_of_another_run_in_the_folder_are_left_out_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let rec = |pid: u32, run: &str, name: &str| {
        format!(
            "{{\"t\":\"process\",\"pid\":{pid},\"run\":\"{run}\"}}\n{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":10,\"e\":20,\"c\":1}}\n{{\"t\":\"end\",\"records\":1,\"dropped\":0}}\n"
        )
    };
    std::fs::write(dir.path().join("trace.jsonl"), rec(10, "b", "main")).unwrap();
    std::fs::write(dir.path().join("trace.jsonl.11"), rec(11, "b", "child")).unwrap();
    std::fs::write(dir.path().join("trace.jsonl.7"), rec(7, "a", "stale")).unwrap();
    std::fs::write(
        dir.path().join("trace.jsonl.8"),
        "{\"t\":\"process\",\"pid\":8}\n{\"t\":\"kernel\",\"name\":\"old\",\"s\":10,\"e\":20}\n",
    )
    .unwrap();
    let t = read_kopt_trace_set(&dir.path().join("trace.jsonl")).unwrap();
    let names: Vec<&str> = t
        .timeline
        .activities
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.contains(&"main") && names.contains(&"child"),
        "{names:?}"
    );
    assert_eq!(t.processes, 2);
    assert_eq!(t.merged_files, vec!["trace.jsonl.11".to_string()]);
    let f = t.source_format();
    assert!(f.contains("merged with trace.jsonl.11"), "{f}");
    assert!(
        f.contains("trace.jsonl.7") && f.contains("trace.jsonl.8"),
        "{f}"
    );
    assert!(f.contains("another run"), "{f}");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// `n` MiB of zeros gzipped: one member of 1 MiB repeated (a reader of
/// multi-member gzip, as kopt's is, reads them all).
fn gzip_zeros_mib(n: usize) -> Vec<u8> {
    let member = gzip(&vec![0u8; 1 << 20]);
    member.repeat(n)
}

#[test]
fn a_gzip_bomb_stops_at_the_ratio_budget_with_its_variable() {
    // 512 MiB of zeros in about 540 KB: refused after 64 MiB (the floor)
    // is decompressed, not after 512 MiB.
    let bomb = gzip_zeros_mib(512);
    assert!(bomb.len() < 2 << 20, "{}", bomb.len());
    let dir = tempfile::tempdir().unwrap();
    for name in ["t.json.gz", "trace.jsonl.gz"] {
        let p = dir.path().join(name);
        std::fs::write(&p, &bomb).unwrap();
        let started = Instant::now();
        let e = if name.ends_with(".json.gz") {
            kopt_ingest::read_kineto(&p).map(|_| ()).unwrap_err()
        } else {
            kopt_ingest::read_kopt_trace(&p).map(|_| ()).unwrap_err()
        };
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        assert!(s.contains("gzip budget"), "{s}");
        assert!(s.contains("KOPT_GZIP_MAX_RATIO="), "{s}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn gzip_inside_gzip_is_refused_before_inflating() {
    // 25 KB that would inflate to 10 GiB in the report; here 1 GiB of
    // zeros compressed twice (about 10 KB): refused after its first bytes.
    let inner = gzip_zeros_mib(1024);
    let double = gzip(&inner);
    assert!(double.len() < 100_000, "{}", double.len());
    let started = Instant::now();
    let e = kopt_ingest::parse_kineto(&double, "double.json.gz").unwrap_err();
    let s = e.to_string();
    assert!(s.contains("gzip inside gzip"), "{s}");
    assert!(s.contains("decompress it once"), "{s}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
