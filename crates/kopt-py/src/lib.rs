//! `kopt._kopt`: kopt's engine in-process. Every function takes plain
//! values, releases the GIL while the engine works, and returns the
//! `kopt/1` JSON of the typed report; the pure-Python layer (`kopt/`) wraps
//! it in objects. Engine errors become `kopt.KoptError` subclasses carrying
//! kopt's one-line messages.

use std::path::PathBuf;
use std::time::Duration;

use kopt_engine::bench::VariantSpec;
use kopt_engine::progress::{Progress, Stream};
use kopt_engine::{
    AnalysisOptions, AnalyzeRequest, BenchRequest, CompareRequest, ProfileRequest, RecordPaths,
    TimingChoice, TimingPass, TraceRequest, WorkloadOptions,
};
use kopt_model::Peaks;
use kopt_report::Format;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_kopt, KoptError, PyException, "Any error kopt reports.");
create_exception!(
    _kopt,
    UsageError,
    KoptError,
    "The request is wrong (an argument out of range, nothing to run)."
);
create_exception!(
    _kopt,
    InputError,
    KoptError,
    "An input file is unreadable or malformed."
);
create_exception!(
    _kopt,
    ToolMissing,
    KoptError,
    "A tool kopt needs is missing (ncu, the tracer library, a GPU)."
);
create_exception!(
    _kopt,
    WorkloadFailed,
    KoptError,
    "The workload failed, timed out, or gave nothing to measure."
);
create_exception!(
    _kopt,
    OutputError,
    KoptError,
    "kopt could not write where it was asked to."
);

fn engine_err(e: kopt_engine::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        kopt_engine::Error::Usage(_) => UsageError::new_err(msg),
        kopt_engine::Error::Input(_) => InputError::new_err(msg),
        kopt_engine::Error::ToolMissing(_) => ToolMissing::new_err(msg),
        kopt_engine::Error::WorkloadFailed(_) => WorkloadFailed::new_err(msg),
        kopt_engine::Error::Output(_) => OutputError::new_err(msg),
    }
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| KoptError::new_err(format!("cannot serialise: {e}")))
}

/// The workload's output and kopt's notes on stderr, as the CLI shows them.
struct StderrProgress;

impl Progress for StderrProgress {
    fn note(&self, message: &str) {
        eprintln!("kopt: {message}");
    }

    fn workload_line(&self, _stream: Stream, line: &str, passthrough: bool) {
        if passthrough {
            eprintln!("{line}");
        }
    }
}

/// A diagnosis kept in Rust: Python reads the small parts at once and the
/// kernel table only when asked (a 2,000-kernel table costs more to build
/// as Python objects than to compute).
#[pyclass(frozen, name = "Diagnosis", module = "kopt._kopt")]
struct DiagnosisHandle {
    d: kopt_model::Diagnosis,
}

fn to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, v).map_err(|e| KoptError::new_err(format!("cannot convert: {e}")))
}

#[pymethods]
impl DiagnosisHandle {
    /// Everything but the kernel table, as a dict.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = &self.d;
        let summary = serde_json::json!({
            "schema": d.schema,
            "run": d.run,
            "device": d.device,
            "total_kernel_ns": d.total_kernel_ns,
            "kernel_count": d.kernels.len(),
            "primary": d.primary,
            "recommendations": d.recommendations,
            "timeline": d.timeline,
            "notes": d.notes,
        });
        to_py(py, &summary)
    }

    /// The kernel table, as a list of dicts.
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.d.kernels)
    }

    /// The whole kopt/1 document, as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.d)
    }

    fn to_json(&self) -> PyResult<String> {
        json(&self.d)
    }

    /// The report as term, md, json or html.
    #[pyo3(signature = (format_name, width=None))]
    fn render(&self, format_name: &str, width: Option<u16>) -> PyResult<String> {
        Ok(format(format_name)?
            .exporter(width)
            .render_to_string(&self.d))
    }
}

/// A diagnosis read back from its kopt/1 JSON.
#[pyfunction]
fn diagnosis_from_json(report_json: &str) -> PyResult<DiagnosisHandle> {
    Ok(DiagnosisHandle {
        d: parse(report_json, "diagnosis")?,
    })
}

fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    kopt_engine::profile::timeout_from_secs(t).map_err(engine_err)
}

#[allow(clippy::too_many_arguments)] // the Python keywords, one to one
fn workload(
    argv: Vec<String>,
    gpu: Option<String>,
    timeout_s: Option<f64>,
    quiet: bool,
    tracer: Option<PathBuf>,
    runs_dir: Option<PathBuf>,
    db: Option<PathBuf>,
    run_dir: Option<PathBuf>,
) -> PyResult<WorkloadOptions> {
    let paths = RecordPaths::current();
    Ok(WorkloadOptions {
        argv,
        gpu,
        timeout: timeout(timeout_s)?,
        quiet,
        tracer,
        runs_dir: runs_dir.unwrap_or(paths.runs_dir),
        db: db.unwrap_or(paths.db),
        run_dir,
    })
}

fn analysis(
    device: Option<String>,
    peak_dram_gbs: Option<f64>,
    top: Option<usize>,
) -> AnalysisOptions {
    AnalysisOptions {
        device,
        measured_peaks: Peaks {
            dram_bytes_per_s: peak_dram_gbs.map(|g| g * 1e9),
            ..Peaks::default()
        },
        top,
    }
}

/// Diagnose existing profiler output; returns the diagnosis as JSON.
#[pyfunction]
#[pyo3(signature = (paths, *, device=None, top=None, ncu=None, peak_dram_gbs=None))]
fn analyze(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    device: Option<String>,
    top: Option<usize>,
    ncu: Option<PathBuf>,
    peak_dram_gbs: Option<f64>,
) -> PyResult<DiagnosisHandle> {
    let req = AnalyzeRequest {
        files: paths,
        ncu,
        analysis: analysis(device, peak_dram_gbs, top),
    };
    let d = py
        .detach(|| kopt_engine::analyze(&req))
        .map_err(engine_err)?;
    Ok(DiagnosisHandle { d })
}

/// Run a workload through kopt's profile passes; returns the diagnosis as JSON.
#[pyfunction]
#[pyo3(signature = (argv, *, module=None, gpu=None, timeout=None, top=20, deep_top=None, kernel=None, timing_pass="tracer", quiet=false, tracer=None, ncu=None, runs_dir=None, db=None, run_dir=None, device=None))]
#[allow(clippy::too_many_arguments)]
fn profile(
    py: Python<'_>,
    argv: Vec<String>,
    module: Option<String>,
    gpu: Option<String>,
    timeout: Option<f64>,
    top: usize,
    deep_top: Option<usize>,
    kernel: Option<String>,
    timing_pass: &str,
    quiet: bool,
    tracer: Option<PathBuf>,
    ncu: Option<PathBuf>,
    runs_dir: Option<PathBuf>,
    db: Option<PathBuf>,
    run_dir: Option<PathBuf>,
    device: Option<String>,
) -> PyResult<DiagnosisHandle> {
    let timing_pass = match timing_pass {
        "tracer" => TimingPass::Tracer,
        "ncu" => TimingPass::Ncu,
        other => {
            return Err(UsageError::new_err(format!(
                "timing_pass {other:?} is not one of tracer, ncu"
            )))
        }
    };
    let req = ProfileRequest {
        run: workload(argv, gpu, timeout, quiet, tracer, runs_dir, db, run_dir)?,
        module,
        kernel_regex: kernel,
        top,
        launches: 1,
        deep_top,
        ncu,
        timing_pass,
        analysis: analysis(device, None, None),
    };
    let d = py
        .detach(|| kopt_engine::profile(&req, &StderrProgress))
        .map_err(engine_err)?;
    Ok(DiagnosisHandle { d })
}

/// Trace a workload with kopt's CUPTI tracer; returns the diagnosis as JSON.
#[pyfunction]
#[pyo3(signature = (argv, *, gpu=None, timeout=None, sample=None, quiet=false, tracer=None, runs_dir=None, db=None, run_dir=None))]
#[allow(clippy::too_many_arguments)]
fn trace(
    py: Python<'_>,
    argv: Vec<String>,
    gpu: Option<String>,
    timeout: Option<f64>,
    sample: Option<String>,
    quiet: bool,
    tracer: Option<PathBuf>,
    runs_dir: Option<PathBuf>,
    db: Option<PathBuf>,
    run_dir: Option<PathBuf>,
) -> PyResult<DiagnosisHandle> {
    let req = TraceRequest {
        run: workload(argv, gpu, timeout, quiet, tracer, runs_dir, db, run_dir)?,
        sample: sample
            .as_deref()
            .map(kopt_engine::trace::parse_sampling)
            .transpose()
            .map_err(engine_err)?,
        keep_timeline: false,
        analysis: AnalysisOptions::default(),
    };
    let t = py
        .detach(|| kopt_engine::trace(&req, &StderrProgress))
        .map_err(engine_err)?;
    Ok(DiagnosisHandle { d: t.diagnosis })
}

/// A/B (or ablation) benchmark of shell commands; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (variants, *, threshold=0.05, noise=0.01, warmup=1, min_samples=10, min_time=0.5, max_time=10.0, noise_target=0.005, seed=42, timing="auto", range=None, tracer=None, check=None, tol=None, journal=None, db=None))]
#[allow(clippy::too_many_arguments)]
#[pyo3(name = "bench")]
fn bench_commands(
    py: Python<'_>,
    variants: Vec<(String, String)>,
    threshold: f64,
    noise: f64,
    warmup: u32,
    min_samples: usize,
    min_time: f64,
    max_time: f64,
    noise_target: f64,
    seed: u64,
    timing: &str,
    range: Option<String>,
    tracer: Option<PathBuf>,
    check: Option<PathBuf>,
    tol: Option<f64>,
    journal: Option<String>,
    db: Option<PathBuf>,
) -> PyResult<String> {
    let mut req = BenchRequest::new(
        variants
            .into_iter()
            .map(|(name, command)| VariantSpec { name, command })
            .collect(),
    );
    req.threshold = threshold;
    req.noise = noise;
    req.warmup = warmup;
    req.stop.min_samples = min_samples;
    req.stop.min_time_s = min_time;
    req.stop.max_time_s = max_time;
    req.stop.noise_target = noise_target;
    req.seed = seed;
    req.timing = match timing {
        "auto" => TimingChoice::Auto,
        "gpu" => TimingChoice::Gpu,
        "reported" => TimingChoice::Reported,
        "wall" => TimingChoice::Wall,
        other => {
            return Err(UsageError::new_err(format!(
                "timing {other:?} is not one of auto, gpu, reported, wall"
            )))
        }
    };
    req.range = range;
    req.tracer = tracer;
    req.check = check;
    req.tol = tol;
    req.journal = journal;
    if let Some(db) = db {
        req.db = db;
    }
    let r = py
        .detach(|| kopt_engine::bench(&req, &StderrProgress))
        .map_err(engine_err)?;
    json(&r)
}

/// The correctness gate on two output files; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (reference, candidate, *, tol=None, tf32=false, db=None))]
fn compare(
    py: Python<'_>,
    reference: PathBuf,
    candidate: PathBuf,
    tol: Option<f64>,
    tf32: bool,
    db: Option<PathBuf>,
) -> PyResult<String> {
    let req = CompareRequest {
        reference,
        candidate,
        tol,
        tf32,
        db,
    };
    let r = py
        .detach(|| kopt_engine::compare(&req, &kopt_engine::Silent))
        .map_err(engine_err)?;
    json(&r)
}

fn format(name: &str) -> PyResult<Format> {
    Format::parse(name).ok_or_else(|| {
        UsageError::new_err(format!(
            "format {name:?} is not one of {}",
            Format::NAMES.join(", ")
        ))
    })
}

fn parse<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| InputError::new_err(format!("not a kopt/1 {what}: {e}")))
}

/// Render a report's JSON (`kind`: diagnosis, bench, compare) as term, md, json or html.
#[pyfunction]
#[pyo3(signature = (kind, report_json, format_name, *, width=None))]
fn render(
    kind: &str,
    report_json: &str,
    format_name: &str,
    width: Option<u16>,
) -> PyResult<String> {
    let f = format(format_name)?;
    Ok(match kind {
        "diagnosis" => {
            let d: kopt_model::Diagnosis = parse(report_json, "diagnosis")?;
            f.exporter(width).render_to_string(&d)
        }
        "bench" => kopt_report::render_bench(&parse(report_json, "bench report")?, f),
        "compare" => kopt_report::render_compare(&parse(report_json, "compare report")?, f),
        "optimize" => kopt_report::render_optimize(&parse(report_json, "optimize report")?, f),
        other => {
            return Err(UsageError::new_err(format!(
                "kind {other:?} is not one of diagnosis, bench, compare, optimize"
            )))
        }
    })
}

/// Write a script into `run_dir` as kopt runs it: a module script with
/// kopt's driver beside it (warm-up, then `steps` NVTX steps), else as it
/// is. Returns the argv to run.
#[pyfunction]
#[pyo3(signature = (run_dir, script_content, module_name, python, warmup=3, steps=20, record_ops=false))]
fn prepare_script(
    run_dir: PathBuf,
    script_content: &str,
    module_name: &str,
    python: &str,
    warmup: u32,
    steps: u32,
    record_ops: bool,
) -> PyResult<Vec<String>> {
    kopt_engine::module_script::prepare(
        &run_dir,
        script_content,
        module_name,
        python,
        warmup,
        steps,
        record_ops,
    )
    .map(|p| p.argv)
    .map_err(engine_err)
}

/// A new run folder under `runs_dir` (default: `.kopt/runs` at the repository root).
#[pyfunction]
#[pyo3(signature = (runs_dir=None))]
fn create_run_dir(runs_dir: Option<PathBuf>) -> PyResult<String> {
    let dir = runs_dir.unwrap_or_else(|| RecordPaths::current().runs_dir);
    let (_, path) = kopt_engine::run_folder::create_run_dir(&dir).map_err(engine_err)?;
    Ok(path.display().to_string())
}

fn candidates(names: Vec<String>) -> PyResult<Vec<kopt_engine::Candidate>> {
    names
        .iter()
        .map(|n| {
            kopt_engine::Candidate::ALL
                .into_iter()
                .find(|c| c.name() == n)
                .ok_or_else(|| {
                    UsageError::new_err(format!(
                        "candidate {n:?} is not one of {}",
                        kopt_engine::Candidate::ALL.map(|c| c.name()).join(", ")
                    ))
                })
        })
        .collect()
}

/// The candidates a diagnosis gives a reason for: JSON list of
/// {name, tried, reason, predicted_speedup}.
#[pyfunction]
#[pyo3(signature = (diagnosis, force=Vec::new()))]
fn optimize_choose(diagnosis: &DiagnosisHandle, force: Vec<String>) -> PyResult<String> {
    let d = &diagnosis.d;
    let list: Vec<serde_json::Value> = kopt_engine::optimize::choose(d, &candidates(force)?)
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.candidate.name(),
                "tried": c.tried,
                "reason": c.reason,
                "predicted_speedup": c.predicted_speedup,
            })
        })
        .collect();
    json(&list)
}

/// The verdicts from what the harness wrote into `run_dir/candidates/`;
/// records the journal and history; returns the optimize report as JSON.
#[pyfunction]
#[pyo3(signature = (diagnosis, run_dir, module, *, script="<in-process>", force=Vec::new(), threshold=0.05, noise=0.01, seed=42, journal=None, db=None))]
#[allow(clippy::too_many_arguments)]
fn optimize_conclude(
    py: Python<'_>,
    diagnosis: &DiagnosisHandle,
    run_dir: PathBuf,
    module: String,
    script: &str,
    force: Vec<String>,
    threshold: f64,
    noise: f64,
    seed: u64,
    journal: Option<PathBuf>,
    db: Option<PathBuf>,
) -> PyResult<String> {
    let d = &diagnosis.d;
    let force = candidates(force)?;
    let setting = kopt_engine::optimize::Conclusion {
        module,
        script: script.to_string(),
        baseline_dir: run_dir.join("baseline"),
        run_dir,
        threshold,
        noise,
        seed,
        journal,
        db: db.unwrap_or_else(|| RecordPaths::current().db),
    };
    let r = py
        .detach(|| {
            kopt_engine::optimize::conclude_from_folder(&setting, d, &force, &StderrProgress)
        })
        .map_err(engine_err)?;
    json(&r)
}

/// The optimize harness's Python source (run in-process by kopt.optimize).
#[pyfunction]
fn optimize_harness_source() -> &'static str {
    kopt_engine::module_script::optimize_harness_source()
}

/// The `kopt` command line (the console script); returns its exit code.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<String>) -> u8 {
    py.detach(|| kopt::run(args))
}

#[pymodule]
fn _kopt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("KoptError", py.get_type::<KoptError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("ToolMissing", py.get_type::<ToolMissing>())?;
    m.add("WorkloadFailed", py.get_type::<WorkloadFailed>())?;
    m.add("OutputError", py.get_type::<OutputError>())?;
    m.add_class::<DiagnosisHandle>()?;
    m.add_function(wrap_pyfunction!(diagnosis_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(profile, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(bench_commands, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(render, m)?)?;
    m.add_function(wrap_pyfunction!(create_run_dir, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_script, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_choose, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_conclude, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_harness_source, m)?)?;
    Ok(())
}
