//! Fuzz targets for kopt's parsers: one function per input format, shared by
//! the cargo-fuzz (libFuzzer) targets under `fuzz/` and by the stable-Rust
//! driver in [`driver`] that CI runs.
//!
//! Each target parses the bytes and, when they parse, feeds the result on the
//! way `kopt analyze` / `kopt bench` would (profile, analysis, every
//! exporter), since a panic can sit downstream of the parser too. A target
//! returns whether the input parsed, which the stable driver uses to keep
//! accepted mutants for further mutation; libFuzzer ignores it.
//!
//! Inputs that stand for several files (an ncu raw page with its details
//! page, a run folder) hold them one after another, split by [`FILE_SEPARATOR`].

pub mod alloc;
pub mod driver;
pub mod mutate;

use std::path::Path;

use kopt_analyze::AnalyzeOptions;
use kopt_ingest::tensor::Tensor;
use kopt_model::{Diagnosis, Profile, Timeline};
use kopt_report::Format;

/// Splits an input into the files it stands for (run folders, ncu page pairs).
pub const FILE_SEPARATOR: &[u8] = b"\n@@@@\n";

/// One fuzz target: its name (the corpus folder's and the cargo-fuzz
/// target's) and the function that runs one input.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> bool,
}

/// Every target, in the order CI runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "ncu_csv",
        run: fuzz_ncu_csv,
    },
    Target {
        name: "kineto",
        run: fuzz_kineto,
    },
    Target {
        name: "kineto_serde",
        run: fuzz_kineto_serde,
    },
    Target {
        name: "kopt_trace",
        run: fuzz_kopt_trace,
    },
    Target {
        name: "npy",
        run: fuzz_npy,
    },
    Target {
        name: "safetensors",
        run: fuzz_safetensors,
    },
    Target {
        name: "run_folder",
        run: fuzz_run_folder,
    },
    Target {
        name: "rocprof",
        run: fuzz_rocprof,
    },
    Target {
        name: "rocprofv3_json",
        run: fuzz_rocprofv3_json,
    },
    Target {
        name: "rocpd",
        run: fuzz_rocpd,
    },
    Target {
        name: "tune_space",
        run: fuzz_tune_space,
    },
    Target {
        name: "gzip",
        run: fuzz_gzip,
    },
    Target {
        name: "demangle",
        run: fuzz_demangle,
    },
];

pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|t| t.name == name)
}

/// The input cut at [`FILE_SEPARATOR`]s.
pub fn split_files(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(p) = find(rest, FILE_SEPARATOR) {
        parts.push(&rest[..p]);
        rest = &rest[p + FILE_SEPARATOR.len()..];
    }
    parts.push(rest);
    parts
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// ncu CSV pages (raw or details). Up to three files: each that parses is
/// merged into one profile (a raw page and its details page exercise the
/// rule attachment of `merge_profile`).
pub fn fuzz_ncu_csv(data: &[u8]) -> bool {
    let files: Vec<_> = split_files(data)
        .into_iter()
        .take(3)
        .enumerate()
        .filter_map(|(i, part)| {
            let label = format!("fuzz{i}.csv");
            kopt_ingest::parse_ncu_csv(part, &label)
                .ok()
                .map(|f| (label, f))
        })
        .collect();
    if files.is_empty() {
        return false;
    }
    downstream(kopt_ingest::merge_profile(files));
    true
}

/// AMD profiler output (rocprofv3 / rocprof / rocprof-compute CSV, rocminfo
/// text): up to four files of one run, each parsed, then merged with a
/// timeline (as `kopt analyze` merges files) and without (a workload folder).
pub fn fuzz_rocprof(data: &[u8]) -> bool {
    let files: Vec<_> = split_files(data)
        .into_iter()
        .take(4)
        .enumerate()
        .filter_map(|(i, part)| {
            let label = format!("fuzz{i}.csv");
            kopt_ingest::parse_rocprof(part, &label)
                .ok()
                .map(|f| (label, f))
        })
        .collect();
    if files.is_empty() {
        return false;
    }
    let _ = kopt_ingest::rocprof::merge_rocprof(files.clone(), false);
    let Ok(profile) = kopt_ingest::rocprof::merge_rocprof(files, true) else {
        return true;
    };
    if let Some(t) = &profile.timeline {
        timeline_consumers(t);
    }
    downstream(profile);
    true
}

/// Parsed AMD files merged as `kopt analyze` merges them (with a timeline)
/// and as a counter capture (without), then analysed and exported.
fn amd_downstream(label: &str, files: Vec<kopt_ingest::AmdFile>) {
    let files: Vec<_> = files.into_iter().map(|f| (label.to_string(), f)).collect();
    let _ = kopt_ingest::rocprof::merge_rocprof(files.clone(), false);
    let Ok(profile) = kopt_ingest::rocprof::merge_rocprof(files, true) else {
        return;
    };
    if let Some(t) = &profile.timeline {
        timeline_consumers(t);
    }
    downstream(profile);
}

/// rocprofv3's JSON output (`--output-format json`).
pub fn fuzz_rocprofv3_json(data: &[u8]) -> bool {
    match kopt_ingest::rocprof::parse_rocprofv3_json(data, "fuzz.json") {
        Ok(files) => {
            amd_downstream("fuzz.json", files);
            true
        }
        Err(_) => false,
    }
}

/// A rocpd SQLite database (rocprofv3 `--output-format rocpd`), loaded from
/// memory and read through its views.
pub fn fuzz_rocpd(data: &[u8]) -> bool {
    match kopt_ingest::rocprof::parse_rocpd(data, "fuzz.db") {
        Ok(files) => {
            amd_downstream("fuzz.db", files);
            true
        }
        Err(_) => false,
    }
}

/// A gzipped trace: decompressed under the gzip budgets (ratio and size
/// caps, gzip in gzip refused), then read as a Kineto trace and as a kopt
/// trace; also handed to `parse_kineto` whole, as `kopt analyze t.json.gz`.
pub fn fuzz_gzip(data: &[u8]) -> bool {
    let _ = kopt_ingest::parse_kineto(data, "fuzz.json.gz");
    let Ok(plain) = kopt_ingest::kineto::decompress(data, "fuzz.gz") else {
        return false;
    };
    let _ = kopt_ingest::parse_kineto(&plain, "fuzz.json");
    let text = String::from_utf8_lossy(&plain);
    if let Ok(t) = kopt_ingest::parse_kopt_trace(&text, "fuzz.jsonl") {
        timeline_consumers(&t.timeline);
    }
    true
}

/// A kernel name through the demangler (as it is, and as a `_Z` symbol):
/// bounded in work and output whatever the name.
pub fn fuzz_demangle(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let mut demangled = false;
    for name in [text.to_string(), format!("_Z{text}")] {
        let (out, _) = kopt_ingest::kopt_trace::demangle_bounded(&name);
        assert!(
            out.len() <= kopt_ingest::kopt_trace::DEMANGLED_MAX_BYTES.max(name.len()),
            "demangled to {} bytes",
            out.len()
        );
        demangled |= out != name;
    }
    demangled
}

/// A Kineto / torch.profiler trace through `parse_kineto`: a well-formed one
/// takes the fast scanner (`kineto_fast`, private to kopt-ingest), anything
/// it does not expect falls to the serde path and its repair.
pub fn fuzz_kineto(data: &[u8]) -> bool {
    kineto(data)
}

/// The same, with the fast scanner made to give up first so the serde path
/// reads even well-formed input: an escaped top-level key (`"\u006b"`, "k")
/// is something the fast scanner refuses and serde reads and ignores.
pub fn fuzz_kineto_serde(data: &[u8]) -> bool {
    kineto(&force_serde_path(data))
}

/// `data` with `"\u006b":0` as the first key of its top-level object (if it
/// starts with one); the fast scanner refuses escaped keys.
pub fn force_serde_path(data: &[u8]) -> Vec<u8> {
    let Some(open) = data.iter().position(|b| !b.is_ascii_whitespace()) else {
        return data.to_vec();
    };
    if data[open] != b'{' {
        return data.to_vec();
    }
    let rest = &data[open + 1..];
    let empty = rest
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'}');
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&data[..=open]);
    out.extend_from_slice(br#""\u006b":0"#);
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    out
}

fn kineto(data: &[u8]) -> bool {
    let Ok(trace) = kopt_ingest::parse_kineto(data, "fuzz.json") else {
        return false;
    };
    timeline_consumers(&trace.timeline);
    downstream(kopt_ingest::profile_from_trace(trace, "fuzz.json"));
    true
}

/// kopt's own trace (JSON lines from kopt-tracer). Bytes that are not UTF-8
/// are read lossily: the reader takes text.
pub fn fuzz_kopt_trace(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let Ok(trace) = kopt_ingest::parse_kopt_trace(&text, "fuzz.jsonl") else {
        return false;
    };
    timeline_consumers(&trace.timeline);
    // `kopt profile`'s path when ncu cannot run: the trace as pass 1.
    let (timing, source) =
        kopt_ingest::TimingPass::from_timeline(trace.timeline.clone(), "fuzz.jsonl");
    downstream(kopt_ingest::merge_tiered(timing, None, None, vec![source]));
    downstream(kopt_ingest::profile_from_timeline(
        trace.timeline,
        "fuzz.jsonl",
        "kopt trace (CUPTI)",
    ));
    true
}

/// The most points a fuzzed space is expanded to: enough to evaluate every
/// constraint many times, few enough for the driver's 5 s per input.
const SPACE_POINTS: usize = 4096;

/// `kopt tune`'s space language: the input as a space file (parameters,
/// ranges, constraints), the space built and its points enumerated with
/// every constraint evaluated; each line also as a `--param` and a
/// `--baseline` argument.
pub fn fuzz_tune_space(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(64) {
        let _ = kopt_space::parse_param(line);
        let _ = kopt_space::parse_assignment(line);
    }
    let Ok((params, constraints)) = kopt_space::parse_space_text(&text) else {
        return false;
    };
    let Ok(space) = kopt_space::Space::new(params, &constraints) else {
        return false;
    };
    if let Ok((points, _excluded)) = space.points(SPACE_POINTS) {
        for point in points.iter().take(8) {
            let label = space.label(point);
            let names: Vec<String> = space
                .params
                .iter()
                .map(|p| format!("{{{}}}", p.name))
                .collect();
            let _ = space.substitute(&format!("{label} {}", names.join(" ")), point);
        }
    }
    true
}

/// A NumPy `.npy` file, compared with itself as `kopt bench`'s correctness gate would.
pub fn fuzz_npy(data: &[u8]) -> bool {
    let Ok(t) = kopt_ingest::tensor::parse_npy(data, "fuzz.npy") else {
        return false;
    };
    compare(&t, &t);
    true
}

/// A `.safetensors` file: each tensor compared with itself and with the first.
pub fn fuzz_safetensors(data: &[u8]) -> bool {
    let Ok(ts) = kopt_ingest::tensor::parse_safetensors(data, "fuzz.safetensors") else {
        return false;
    };
    for t in ts.iter().take(8) {
        compare(t, t);
        compare(&ts[0], t);
    }
    true
}

/// The files of a `kopt profile` run folder, in this order: the passes, a
/// second process's trace (`trace.jsonl.<pid>`, which `read_kopt_trace_set`
/// merges), the bare run's steps and the run's record (`run.json`, whose
/// `kernel_filter` regex is applied again).
pub const RUN_FOLDER_FILES: [&str; 7] = [
    kopt_ingest::tiered::TIMING_TRACE,
    kopt_ingest::tiered::TIMING_CSV,
    kopt_ingest::tiered::TARGETED_CSV,
    kopt_ingest::tiered::DEEP_CSV,
    "trace.jsonl.4242",
    kopt_ingest::BARE_STEPS_FILE,
    kopt_model::run_folder::RUN_JSON,
];

thread_local! {
    static RUN_DIR: tempfile::TempDir = tempfile::Builder::new()
        .prefix("kopt-fuzz-run")
        .tempdir()
        .expect("a temporary folder for run-folder inputs");
}

/// A run folder: the input's parts (split at [`FILE_SEPARATOR`]) are the
/// files of [`RUN_FOLDER_FILES`] in order; a part starting with `+` is
/// written (without the `+`), any other part or a missing one leaves that
/// file out.
pub fn fuzz_run_folder(data: &[u8]) -> bool {
    RUN_DIR.with(|dir| {
        let dir = dir.path();
        let parts = split_files(data);
        for (i, name) in RUN_FOLDER_FILES.iter().enumerate() {
            let path = dir.join(name);
            match parts.get(i).and_then(|p| p.strip_prefix(b"+")) {
                Some(content) => std::fs::write(&path, content).expect("writing a run-folder file"),
                None => {
                    if path.exists() {
                        std::fs::remove_file(&path).expect("removing a run-folder file");
                    }
                }
            }
        }
        run_folder(dir)
    })
}

fn run_folder(dir: &Path) -> bool {
    // As `kopt analyze FOLDER` reads it: run.json first, then the passes.
    let Ok(profile) = kopt_ingest::read_run_folder_filtered(dir) else {
        return false;
    };
    if let Some(t) = &profile.timeline {
        timeline_consumers(t);
    }
    downstream(profile);
    true
}

/// What reads a timeline besides the analysis: `kopt trace --export` and
/// `kopt bench`'s per-range GPU time.
fn timeline_consumers(t: &Timeline) {
    let mut sink = Vec::new();
    kopt_report::chrome_trace::write_chrome_trace(t, &mut sink)
        .expect("writing to a Vec cannot fail");
    let _ = kopt_analyze::timeline::gpu_time_per_range(t, None);
    if let Some(r) = t.ranges.first() {
        let family = kopt_model::range_family(&r.name).to_string();
        let _ = kopt_analyze::timeline::gpu_time_per_range(t, Some(&family));
    }
}

/// The analysis and every exporter, as `kopt analyze` runs them.
fn downstream(profile: Profile) {
    let _ = kopt_analyze::top_kernel_functions(&profile, 8, 0.9);
    let d = kopt_analyze::analyze(&profile, &AnalyzeOptions::default());
    render(&d);
}

/// Render `d` in every format; the terminal and Markdown reports must carry
/// no control character but the line break (they reach a terminal).
pub fn render(d: &Diagnosis) {
    for format in [
        Format::Terminal,
        Format::Markdown,
        Format::Json,
        Format::Html,
    ] {
        let width = (format == Format::Terminal).then_some(120);
        let text = format.exporter(width).render_to_string(d);
        if matches!(format, Format::Terminal | Format::Markdown) {
            if let Some(c) = text.chars().find(|&c| c != '\n' && c.is_control()) {
                panic!(
                    "{format:?} output holds the control character {:?}",
                    c.escape_unicode().to_string()
                );
            }
        }
    }
}

fn compare(a: &Tensor, b: &Tensor) {
    let _ = kopt_bench::compare_tensor(&a.name, a, b, None, false);
    let _ = kopt_bench::compare_tensor(&b.name, b, a, Some(0.0), true);
    let _ = kopt_bench::compare_tensors(
        std::slice::from_ref(a),
        std::slice::from_ref(b),
        None,
        false,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_force_serde() {
        assert_eq!(
            split_files(b"a\n@@@@\nb\n@@@@\n"),
            vec![&b"a"[..], b"b", b""]
        );
        assert_eq!(
            force_serde_path(b" {\"traceEvents\": []}"),
            b" {\"\\u006b\":0,\"traceEvents\": []}".to_vec()
        );
        assert_eq!(force_serde_path(b"{ }"), b"{\"\\u006b\":0 }".to_vec());
        assert_eq!(force_serde_path(b"[1]"), b"[1]".to_vec());
    }

    #[test]
    fn serde_path_reads_what_the_fast_path_reads() {
        let t = br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2, "args": {"correlation": 7}}]}"#;
        let fast = kopt_ingest::parse_kineto(t, "a").unwrap();
        let slow = kopt_ingest::parse_kineto(&force_serde_path(t), "a").unwrap();
        assert_eq!(fast.timeline, slow.timeline);
        assert_eq!(fast.timeline.activities.len(), 1);
    }
}
