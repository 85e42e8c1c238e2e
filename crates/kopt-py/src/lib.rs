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
    AnalysisOptions, AnalyzeRequest, BenchRequest, CompareRequest, HistoryDb, ProfileRequest,
    ScriptSource, TimingPass, TraceRequest, Workload, WorkloadOptions,
};
use kopt_model::Peaks;
use kopt_report::{Format, Layout, Render};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

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
    // The CLI's flags, in the keywords a Python caller passes.
    let msg = e
        .to_string()
        .replace("pass --ncu PATH", "pass ncu=PATH")
        .replace(
            "pass --tracer PATH",
            "set KOPT_TRACER=PATH or pass tracer=PATH",
        );
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

    /// The report as term, md, json or html; `verbose`: the whole terminal
    /// report (evidence, actions, notes under each kernel), as `kopt -v`.
    #[pyo3(signature = (format_name, width=None, verbose=false))]
    fn render(&self, format_name: &str, width: Option<u16>, verbose: bool) -> PyResult<String> {
        let layout = Layout {
            verbose,
            ..Layout::width(width)
        };
        Ok(self.d.render(format(format_name)?, layout))
    }
}

/// A diagnosis read back from its kopt/1 JSON.
#[pyfunction]
fn diagnosis_from_json(report_json: &str) -> PyResult<DiagnosisHandle> {
    Ok(DiagnosisHandle {
        d: kopt_engine::record::diagnosis_from_json(report_json, "report_json")
            .map_err(engine_err)?,
    })
}

fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    kopt_engine::profile::timeout_from_secs(t).map_err(engine_err)
}

#[allow(clippy::too_many_arguments)] // the Python keywords, one to one
fn workload(
    workload: Workload,
    gpu: Option<String>,
    timeout_s: Option<f64>,
    quiet: bool,
    tracer: Option<PathBuf>,
    runs_dir: Option<PathBuf>,
    db: Option<PathBuf>,
    run_dir: Option<PathBuf>,
) -> PyResult<WorkloadOptions> {
    Ok(WorkloadOptions {
        workload,
        gpu,
        timeout: timeout(timeout_s)?,
        quiet,
        tracer,
        runs_dir,
        db,
        run_dir,
    })
}

/// What `profile` runs: `argv`, or a script given as text (`script`),
/// written into the run folder by the engine once the request is accepted.
fn target(
    argv: Option<Vec<String>>,
    script: Option<String>,
    module: Option<&str>,
    python: Option<String>,
    (warmup, steps, record_ops): (u32, u32, bool),
) -> PyResult<Workload> {
    match (argv, script) {
        (Some(argv), None) => Ok(Workload::Command(argv)),
        (None, Some(text)) => {
            let module =
                module.ok_or_else(|| UsageError::new_err("a script needs module= (its name)"))?;
            let python = python.unwrap_or_else(|| "python3".into());
            let mut s = ScriptSource::new(text, module.to_string(), python);
            s.warmup = warmup;
            s.steps = steps;
            s.record_ops = record_ops;
            Ok(Workload::Script(s))
        }
        (Some(_), Some(_)) => Err(UsageError::new_err("give argv or script=, not both")),
        (None, None) => Err(UsageError::new_err("nothing to run: give argv or script=")),
    }
}

fn analysis(
    device: Option<String>,
    peak_dram_gbs: Option<f64>,
    top: Option<usize>,
    keep_warmup: bool,
) -> AnalysisOptions {
    AnalysisOptions {
        device,
        measured_peaks: Peaks {
            dram_bytes_per_s: peak_dram_gbs.map(|g| g * 1e9),
            ..Peaks::default()
        },
        top,
        keep_warmup,
        calibration: HistoryDb::Project,
    }
}

/// Diagnose existing profiler output; returns the diagnosis as JSON.
#[pyfunction]
#[pyo3(signature = (paths, *, device=None, top=None, ncu=None, peak_dram_gbs=None, keep_warmup=false, bare_command=None, gpu=None, timeout=None, tracer=None, runs_dir=None))]
#[allow(clippy::too_many_arguments)]
fn analyze(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    device: Option<String>,
    top: Option<usize>,
    ncu: Option<PathBuf>,
    peak_dram_gbs: Option<f64>,
    keep_warmup: bool,
    bare_command: Option<Vec<String>>,
    gpu: Option<String>,
    timeout: Option<f64>,
    tracer: Option<PathBuf>,
    runs_dir: Option<PathBuf>,
) -> PyResult<DiagnosisHandle> {
    let bare_run = bare_command
        .map(|argv| {
            let argv = Workload::Command(argv);
            workload(argv, gpu, timeout, true, tracer, runs_dir, None, None)
        })
        .transpose()?;
    let req = AnalyzeRequest {
        files: paths,
        ncu,
        bare_run,
        analysis: analysis(device, peak_dram_gbs, top, keep_warmup),
    };
    let d = py
        .detach(|| kopt_engine::analyze(&req, &StderrProgress))
        .map_err(engine_err)?;
    Ok(DiagnosisHandle { d })
}

/// A folder of per-rank traces (or a run folder of `kopt trace` over a
/// launcher) read as one distributed job, rendered in `format_name`.
#[pyfunction]
#[pyo3(signature = (folder, format_name="json"))]
fn analyze_ranks(py: Python<'_>, folder: PathBuf, format_name: &str) -> PyResult<String> {
    let fmt = format(format_name)?;
    let d = py
        .detach(|| -> kopt_engine::Result<kopt_model::RanksDiagnosis> {
            let files = kopt_engine::ranks::rank_folder(std::slice::from_ref(&folder))?
                .ok_or_else(|| {
                    kopt_engine::Error::Input(format!(
                        "{}: not a folder of per-rank traces (two or more *.json / *.json.gz traces, or a run folder of ranked kopt traces)",
                        folder.display()
                    ))
                })?;
            kopt_engine::ranks::analyze_ranks(&files)
        })
        .map_err(engine_err)?;
    Ok(d.render(fmt, Layout::default()))
}

/// Run a workload through kopt's profile passes; returns the diagnosis as JSON.
#[pyfunction]
#[pyo3(signature = (argv=None, *, script=None, python=None, warmup=3, steps=20, ops=false, module=None, gpu=None, timeout=None, profile_top=None, top=None, deep_top=None, kernel=None, timing_pass="tracer", quiet=false, tracer=None, ncu=None, runs_dir=None, db=None, run_dir=None, device=None, bare_run=true, verify=0))]
#[allow(clippy::too_many_arguments)]
fn profile(
    py: Python<'_>,
    argv: Option<Vec<String>>,
    script: Option<String>,
    python: Option<String>,
    warmup: u32,
    steps: u32,
    ops: bool,
    module: Option<String>,
    gpu: Option<String>,
    timeout: Option<f64>,
    profile_top: Option<usize>,
    top: Option<usize>,
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
    bare_run: bool,
    verify: usize,
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
    let what = target(
        argv,
        script,
        module.as_deref(),
        python,
        (warmup, steps, ops),
    )?;
    let req = ProfileRequest {
        run: workload(what, gpu, timeout, quiet, tracer, runs_dir, db, run_dir)?,
        module,
        kernel_regex: kernel,
        profile_top: profile_top.unwrap_or(20),
        counters_forced: profile_top.is_some() || deep_top.is_some(),
        launches: 1,
        deep_top,
        ncu,
        timing_pass,
        backend: kopt_engine::Backend::Auto,
        rocprof: None,
        bare_run,
        analysis: analysis(device, None, top, false),
        verify,
    };
    let d = py
        .detach(|| kopt_engine::profile(&req, &StderrProgress))
        .map_err(engine_err)?;
    Ok(DiagnosisHandle { d })
}

/// Trace a workload with kopt's CUPTI tracer; returns the diagnosis as JSON.
#[pyfunction]
#[pyo3(signature = (argv, *, gpu=None, timeout=None, sample=None, quiet=false, tracer=None, runs_dir=None, db=None, run_dir=None, bare_run=true))]
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
    bare_run: bool,
) -> PyResult<DiagnosisHandle> {
    let req = TraceRequest {
        run: workload(
            Workload::Command(argv),
            gpu,
            timeout,
            quiet,
            tracer,
            runs_dir,
            db,
            run_dir,
        )?,
        sample: sample
            .as_deref()
            .map(kopt_engine::trace::parse_sampling)
            .transpose()
            .map_err(engine_err)?,
        keep_timeline: false,
        bare_run,
        analysis: AnalysisOptions::default(),
    };
    let t = py
        .detach(|| kopt_engine::trace(&req, &StderrProgress))
        .map_err(engine_err)?;
    Ok(DiagnosisHandle { d: t.diagnosis })
}

/// The measuring keywords `bench` and `tune` share, as the Python layer
/// passes them: one dict with every key, `None` where the caller gave none.
/// Read into the engine's `MeasureOptions` (the CLI's flags, lowered the
/// same way), where a key left out takes `Measurement::default()`'s value.
/// A value of the wrong type is a `TypeError`; an unknown key or timing
/// name a `UsageError`.
struct MeasureKw(kopt_engine::MeasureOptions);

impl<'py> FromPyObject<'_, 'py> for MeasureKw {
    type Error = PyErr;

    fn extract(ob: Borrowed<'_, 'py, PyAny>) -> PyResult<MeasureKw> {
        let py = ob.py();
        let given = PyDict::new(py);
        for (key, value) in ob.cast::<PyDict>()?.iter() {
            if !value.is_none() {
                given.set_item(key, value)?;
            }
        }
        pythonize::depythonize(given.as_any())
            .map(MeasureKw)
            .map_err(|e| {
                let e = PyErr::from(e);
                // pythonize raises a bare Exception for serde's own messages
                // (an unknown key, a timing that is none of the names).
                if e.get_type(py)
                    .is(py.get_type::<pyo3::exceptions::PyException>())
                {
                    UsageError::new_err(e.value(py).to_string())
                } else {
                    e
                }
            })
    }
}

impl MeasureKw {
    fn lower(self) -> kopt_engine::Measurement {
        self.0.lower()
    }
}

/// The engine's measuring defaults (`Measurement::default()`, or with
/// `in_process` the in-process gate's, `Measurement::in_process()`) under
/// the keyword names `bench` and `tune` take: a keyword left at `None`
/// gets these.
#[pyfunction]
#[pyo3(signature = (*, in_process=false))]
fn measure_defaults(py: Python<'_>, in_process: bool) -> PyResult<Bound<'_, PyAny>> {
    let m = if in_process {
        kopt_engine::Measurement::in_process()
    } else {
        kopt_engine::Measurement::default()
    };
    pythonize::pythonize(py, &kopt_engine::MeasureOptions::from(&m)).map_err(PyErr::from)
}

/// The run history as `kopt history` prints it, in `format_name`: the
/// newest `limit` runs, one run (`run`), two side by side (`runs`), or the
/// calibration of predictions (`calibration=True`).
#[pyfunction]
#[pyo3(signature = (*, db=None, limit=20, run=None, runs=None, calibration=false, format_name="term"))]
fn history(
    py: Python<'_>,
    db: Option<PathBuf>,
    limit: usize,
    run: Option<i64>,
    runs: Option<(i64, i64)>,
    calibration: bool,
    format_name: &str,
) -> PyResult<String> {
    use kopt_engine::history;
    let (f, layout) = (format(format_name)?, Layout::default());
    let db = db.as_deref();
    py.detach(|| match (run, runs, calibration) {
        (None, None, false) => Ok(history::list(db, limit)?.render(f, layout)),
        (Some(id), None, false) => Ok(history::show(db, id)?.render(f, layout)),
        (None, Some((a, b)), false) => Ok(history::diff(db, a, b)?.render(f, layout)),
        (None, None, true) => Ok(history::calibration_report(db)?.render(f, layout)),
        _ => Err(kopt_engine::Error::Usage(
            "give at most one of run, runs and calibration".into(),
        )),
    })
    .map_err(engine_err)
}

/// A/B (or ablation) benchmark of shell commands; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (variants, measure, *, journal=None, db=None))]
#[pyo3(name = "bench")]
fn bench_commands(
    py: Python<'_>,
    variants: Vec<(String, String)>,
    measure: MeasureKw,
    journal: Option<String>,
    db: Option<PathBuf>,
) -> PyResult<String> {
    let mut req = BenchRequest::new(
        variants
            .into_iter()
            .map(|(name, command)| VariantSpec { name, command })
            .collect(),
    );
    req.measure = measure.lower();
    req.journal = journal;
    if let Some(db) = db {
        req.db = db;
    }
    let r = py
        .detach(|| kopt_engine::bench(&req, &StderrProgress))
        .map_err(engine_err)?;
    json(&r)
}

/// The in-process gate's verdict on the facts its harness collected
/// (JSON, `kopt.bench(baseline=fn, candidate=fn)`); returns the gate report
/// as JSON. Peaks come from kopt's device table by the facts' device name;
/// the rule left at `None` is the engine's (`Measurement::default()`).
#[pyfunction]
#[pyo3(signature = (facts_json, *, threshold=None, noise=None, seed=None, tol=None))]
fn gate_decide(
    facts_json: &str,
    threshold: Option<f64>,
    noise: Option<f64>,
    seed: Option<u64>,
    tol: Option<f64>,
) -> PyResult<String> {
    let engine = kopt_engine::Measurement::default();
    let (threshold, noise, seed) = (
        threshold.unwrap_or(engine.threshold),
        noise.unwrap_or(engine.noise),
        seed.unwrap_or(engine.seed),
    );
    let facts: kopt_bench::GateFacts = serde_json::from_str(facts_json)
        .map_err(|e| InputError::new_err(format!("not the gate harness's facts: {e}")))?;
    if !(threshold.is_finite() && (0.0..1.0).contains(&threshold)) {
        return Err(UsageError::new_err(format!(
            "threshold {threshold} is not between 0 and 1"
        )));
    }
    if !(noise.is_finite() && noise >= 0.0) {
        return Err(UsageError::new_err(format!("noise {noise} is negative")));
    }
    if tol.is_some_and(|t| !(t.is_finite() && t >= 0.0)) {
        return Err(UsageError::new_err("tol must be a non-negative number"));
    }
    let peaks = gate_peaks(facts.device.as_deref());
    let settings = kopt_bench::GateSettings {
        threshold,
        noise,
        seed,
        tol,
        ..kopt_bench::GateSettings::default()
    };
    let mut r = kopt_bench::judge(&facts, &settings, &peaks).map_err(WorkloadFailed::new_err)?;
    r.notes.extend(kopt_bench::gate::peak_notes(&facts, &peaks));
    json(&r)
}

fn gate_peaks(device: Option<&str>) -> Peaks {
    device
        .and_then(kopt_model::datasheet_peaks)
        .map(|(_, p)| p)
        .unwrap_or_default()
}

/// The device table's peaks for a device name (bytes/s, FLOP/s), as a dict.
#[pyfunction]
fn device_peaks<'py>(py: Python<'py>, device: &str) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &gate_peaks(Some(device)))
}

/// kopt bench's stopping rule on one side's samples (seconds) after `elapsed` seconds.
#[pyfunction]
#[pyo3(signature = (samples, elapsed, *, min_samples, min_time, noise_target, max_time))]
fn should_stop(
    samples: Vec<f64>,
    elapsed: f64,
    min_samples: usize,
    min_time: f64,
    noise_target: f64,
    max_time: f64,
) -> bool {
    kopt_bench::StopRule {
        min_samples,
        min_time_s: min_time,
        noise_target,
        max_time_s: max_time,
    }
    .should_stop(&samples, elapsed)
}

/// The relative-L2 tolerance kopt compare uses for a dtype (f64, f32, bf16, ...).
#[pyfunction]
#[pyo3(signature = (dtype, tf32=false))]
fn default_tolerance(dtype: &str, tf32: bool) -> f64 {
    kopt_bench::default_tolerance(dtype, tf32)
}

/// The correctness gate on two output files; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (reference, candidate, *, tol=None, tf32=false, db=None, atol=None, rtol=None, allow_dtype_change=false))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    reference: PathBuf,
    candidate: PathBuf,
    tol: Option<f64>,
    tf32: bool,
    db: Option<PathBuf>,
    atol: Option<f64>,
    rtol: Option<f64>,
    allow_dtype_change: bool,
) -> PyResult<String> {
    let req = CompareRequest {
        reference,
        candidate,
        tol,
        tf32,
        atol,
        rtol,
        allow_dtype_change,
        // Python records a comparison only in a history it names.
        db: db.map_or(HistoryDb::Off, HistoryDb::At),
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
    let (f, layout) = (format(format_name)?, Layout::width(width));
    Ok(match kind {
        "diagnosis" => kopt_engine::record::diagnosis_from_json(report_json, "report_json")
            .map_err(engine_err)?
            .render(f, layout),
        "bench" => parse::<kopt_model::BenchReport>(report_json, "bench report")?.render(f, layout),
        "compare" => parse::<kopt_model::compare::CompareReport>(report_json, "compare report")?
            .render(f, layout),
        "optimize" => {
            parse::<kopt_model::optimize::OptimizeReport>(report_json, "optimize report")?
                .render(f, layout)
        }
        "tune" => {
            parse::<kopt_model::tune::TuneReport>(report_json, "tune report")?.render(f, layout)
        }
        "gate" => parse::<kopt_model::GateReport>(report_json, "gate report")?.render(f, layout),
        other => {
            return Err(UsageError::new_err(format!(
                "kind {other:?} is not one of diagnosis, bench, compare, optimize, tune, gate"
            )))
        }
    })
}

/// A new run folder under `runs_dir` (default: `.kopt/runs` at the repository root).
#[pyfunction]
#[pyo3(signature = (runs_dir=None))]
fn create_run_dir(runs_dir: Option<PathBuf>) -> PyResult<String> {
    let (_, path) =
        kopt_engine::run_folder::new_run_dir(runs_dir.as_deref()).map_err(engine_err)?;
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
    let list: Vec<serde_json::Value> = kopt_engine::optimize::choose(d, &candidates(force)?, &[])
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

/// How `optimize_stacks` and `optimize_conclude` judge: unset keywords
/// take the engine's defaults (`Measurement::default()`).
#[allow(clippy::too_many_arguments)]
fn conclusion(
    run_dir: PathBuf,
    module: String,
    script: &str,
    threshold: Option<f64>,
    noise: Option<f64>,
    seed: Option<u64>,
    allow_precision: bool,
    journal: Option<PathBuf>,
    db: Option<PathBuf>,
) -> kopt_engine::optimize::Conclusion {
    let defaults = kopt_engine::Measurement::default();
    kopt_engine::optimize::Conclusion {
        module,
        script: script.to_string(),
        baseline_dir: run_dir.join("baseline"),
        run_dir,
        threshold: threshold.unwrap_or(defaults.threshold),
        noise: noise.unwrap_or(defaults.noise),
        seed: seed.unwrap_or(defaults.seed),
        allow_precision,
        journal,
        db,
    }
}

/// The stacks to measure after the singles the harness wrote into
/// `run_dir/candidates/` (the CLI's greedy stacking): a JSON list of
/// `+`-joined names, for the harness to write into `run_dir/stacks/`.
#[pyfunction]
#[pyo3(signature = (diagnosis, run_dir, module, *, force=Vec::new(), threshold=None, noise=None, seed=None, allow_precision=false))]
#[allow(clippy::too_many_arguments)]
fn optimize_stacks(
    py: Python<'_>,
    diagnosis: &DiagnosisHandle,
    run_dir: PathBuf,
    module: String,
    force: Vec<String>,
    threshold: Option<f64>,
    noise: Option<f64>,
    seed: Option<u64>,
    allow_precision: bool,
) -> PyResult<String> {
    let d = &diagnosis.d;
    let force = candidates(force)?;
    let setting = conclusion(
        run_dir,
        module,
        "<in-process>",
        threshold,
        noise,
        seed,
        allow_precision,
        None,
        None,
    );
    let names = py
        .detach(|| kopt_engine::optimize::stacks_from_folder(&setting, d, &force))
        .map_err(engine_err)?;
    json(&names)
}

/// The verdicts from what the harness wrote into `run_dir/candidates/`
/// (and `run_dir/stacks/`, when it measured the stacks
/// `optimize_stacks` named); records the journal and history; returns the
/// optimize report as JSON.
#[pyfunction]
#[pyo3(signature = (diagnosis, run_dir, module, *, script="<in-process>", force=Vec::new(), threshold=None, noise=None, seed=None, allow_precision=false, journal=None, db=None))]
#[allow(clippy::too_many_arguments)]
fn optimize_conclude(
    py: Python<'_>,
    diagnosis: &DiagnosisHandle,
    run_dir: PathBuf,
    module: String,
    script: &str,
    force: Vec<String>,
    threshold: Option<f64>,
    noise: Option<f64>,
    seed: Option<u64>,
    allow_precision: bool,
    journal: Option<PathBuf>,
    db: Option<PathBuf>,
) -> PyResult<String> {
    let d = &diagnosis.d;
    let force = candidates(force)?;
    let setting = conclusion(
        run_dir,
        module,
        script,
        threshold,
        noise,
        seed,
        allow_precision,
        journal,
        db,
    );
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

/// An executor whose trials run wherever the Python callables send them
/// (`kopt.tune(executor="ray")`): `run_trials(jobs_json) -> [outcome_json]`,
/// `run_final(job_json) -> report_json`.
struct PyExecutor {
    run_trials: Py<PyAny>,
    run_final: Py<PyAny>,
    device: (Option<String>, Option<String>),
}

impl kopt_engine::Executor for PyExecutor {
    fn gpus(&self) -> Vec<String> {
        Vec::new()
    }

    fn device(&self) -> (Option<String>, Option<String>) {
        self.device.clone()
    }

    fn run_trials(
        &self,
        jobs: Vec<kopt_engine::tune::TrialJob>,
        done: &mut dyn FnMut(kopt_engine::tune::TrialOutcome),
    ) -> kopt_engine::Result<()> {
        let jobs = serde_json::to_string(&jobs)
            .map_err(|e| kopt_engine::Error::Usage(format!("cannot serialise the jobs: {e}")))?;
        let outcomes: Vec<String> = Python::attach(|py| {
            self.run_trials
                .call1(py, (jobs,))
                .and_then(|r| r.extract::<Vec<String>>(py))
        })
        .map_err(|e| kopt_engine::Error::WorkloadFailed(format!("the executor failed: {e}")))?;
        for o in outcomes {
            let o = serde_json::from_str(&o).map_err(|e| {
                kopt_engine::Error::WorkloadFailed(format!("a trial's outcome cannot be read: {e}"))
            })?;
            done(o);
        }
        Ok(())
    }

    fn run_final(
        &self,
        job: &kopt_engine::tune::FinalJob,
    ) -> kopt_engine::Result<kopt_model::BenchReport> {
        let job = serde_json::to_string(job)
            .map_err(|e| kopt_engine::Error::Usage(format!("cannot serialise the job: {e}")))?;
        let report: String = Python::attach(|py| {
            self.run_final
                .call1(py, (job,))
                .and_then(|r| r.extract::<String>(py))
        })
        .map_err(|e| kopt_engine::Error::WorkloadFailed(format!("the executor failed: {e}")))?;
        serde_json::from_str(&report).map_err(|e| {
            kopt_engine::Error::WorkloadFailed(format!("the final comparison cannot be read: {e}"))
        })
    }
}

/// A parameter sweep (`kopt tune`); returns the report as JSON. With
/// `run_trials` and `run_final` the trials go through those callables
/// (Ray); else one worker per GPU of this host.
#[pyfunction]
#[pyo3(signature = (template, params, *, constraints=Vec::new(), strategy=None, trials=None, baseline=None, key=None, fresh=false, gpus=None, top=3, measure, db=None, run_trials=None, run_final=None, device=None, driver=None))]
#[allow(clippy::too_many_arguments)]
fn tune(
    py: Python<'_>,
    template: String,
    params: Vec<(String, String)>,
    constraints: Vec<String>,
    strategy: Option<String>,
    trials: Option<usize>,
    baseline: Option<String>,
    key: Option<String>,
    fresh: bool,
    gpus: Option<Vec<String>>,
    top: usize,
    measure: MeasureKw,
    db: Option<PathBuf>,
    run_trials: Option<Py<PyAny>>,
    run_final: Option<Py<PyAny>>,
    device: Option<String>,
    driver: Option<String>,
) -> PyResult<String> {
    use kopt_engine::tune::space;
    let params = params
        .iter()
        .map(|(n, v)| space::parse_param(&format!("{n}={v}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| engine_err(e.into()))?;
    let space = space::Space::new(params, &constraints).map_err(|e| engine_err(e.into()))?;
    let mut req = kopt_engine::TuneRequest::new(template, space);
    req.strategy = match strategy.as_deref() {
        None => None,
        Some("grid") => Some(kopt_engine::Strategy::Grid),
        Some("random") => Some(kopt_engine::Strategy::Random),
        Some("halving") => Some(kopt_engine::Strategy::Halving),
        Some(other) => {
            return Err(UsageError::new_err(format!(
                "strategy {other:?} is not one of grid, random, halving"
            )))
        }
    };
    req.trials = trials;
    req.baseline = baseline
        .as_deref()
        .map(space::parse_assignment)
        .transpose()
        .map_err(|e| engine_err(e.into()))?;
    req.key = key;
    req.fresh = fresh;
    req.gpus = gpus;
    req.top = top;
    req.measure = measure.lower();
    if let Some(db) = db {
        req.db = db;
    }
    req.validate().map_err(engine_err)?;
    let r = match (run_trials, run_final) {
        (Some(run_trials), Some(run_final)) => {
            let device = match device {
                Some(d) => (Some(d), driver),
                None => kopt_engine::tune::query_device(None),
            };
            let exec = PyExecutor {
                run_trials,
                run_final,
                device,
            };
            let r = py
                .detach(|| kopt_engine::tune_with(&req, &exec, &StderrProgress))
                .map_err(engine_err)?;
            kopt_engine::tune::record(&req, &r, &StderrProgress);
            r
        }
        (None, None) => py
            .detach(|| kopt_engine::tune(&req, &StderrProgress))
            .map_err(engine_err)?,
        _ => {
            return Err(UsageError::new_err(
                "give both run_trials and run_final, or neither",
            ))
        }
    };
    json(&r)
}

/// One trial job (JSON) measured here, with real processes: what a Ray
/// task runs on its worker. Returns the outcome as JSON.
#[pyfunction]
#[pyo3(signature = (job, *, gpu=None, scratch=None))]
fn tune_run_trial(
    py: Python<'_>,
    job: &str,
    gpu: Option<String>,
    scratch: Option<PathBuf>,
) -> PyResult<String> {
    let job: kopt_engine::tune::TrialJob = parse(job, "trial job")?;
    let own = scratch.is_none();
    let dir = scratch.unwrap_or_else(|| scratch_dir("trial"));
    let out = py.detach(|| {
        let mut sampler = kopt_engine::bench::ProcessSampler::new(job.timing.tracer.clone())?;
        Ok::<_, kopt_engine::Error>(kopt_engine::tune::run_trial_job(
            &job,
            &mut sampler,
            gpu.as_deref(),
            &dir,
        ))
    });
    // The driver reads a kept check output: then the folder outlives this call.
    if own && job.check.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    json(&out.map_err(engine_err)?)
}

/// The final comparison job (JSON) timed here; returns the bench report as JSON.
#[pyfunction]
#[pyo3(signature = (job, *, gpu=None))]
fn tune_run_final(py: Python<'_>, job: &str, gpu: Option<String>) -> PyResult<String> {
    let job: kopt_engine::tune::FinalJob = parse(job, "final job")?;
    let dir = scratch_dir("final");
    let r = py.detach(|| {
        let mut sampler = kopt_engine::bench::ProcessSampler::new(job.timing.tracer.clone())?;
        kopt_engine::tune::run_final_job(&job, &mut sampler, gpu.as_deref(), &dir)
    });
    let _ = std::fs::remove_dir_all(&dir);
    json(&r.map_err(engine_err)?)
}

/// A fresh folder under the temporary directory for one job.
fn scratch_dir(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "kopt-tune-{what}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// The `kopt` command line (the console script); returns its exit code.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<String>) -> u8 {
    py.detach(|| kopt::run(args))
}

/// The in-process gate's harness source (`kopt._gate_harness` runs it):
/// one text for the package and `kopt bench --script`.
#[pyfunction]
fn gate_harness_source() -> &'static str {
    kopt_engine::gate::HARNESS
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
    m.add_function(wrap_pyfunction!(analyze_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(profile, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(bench_commands, m)?)?;
    m.add_function(wrap_pyfunction!(measure_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(history, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(gate_decide, m)?)?;
    m.add_function(wrap_pyfunction!(gate_harness_source, m)?)?;
    m.add_function(wrap_pyfunction!(device_peaks, m)?)?;
    m.add_function(wrap_pyfunction!(should_stop, m)?)?;
    m.add_function(wrap_pyfunction!(default_tolerance, m)?)?;
    m.add_function(wrap_pyfunction!(render, m)?)?;
    m.add_function(wrap_pyfunction!(create_run_dir, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(tune_run_trial, m)?)?;
    m.add_function(wrap_pyfunction!(tune_run_final, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_choose, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_stacks, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_conclude, m)?)?;
    m.add_function(wrap_pyfunction!(optimize_harness_source, m)?)?;
    Ok(())
}
