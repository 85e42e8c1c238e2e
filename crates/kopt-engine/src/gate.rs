//! `kopt bench --script A.py --candidate-script B.py`: two module scripts
//! (an `nn.Module` class and `get_inputs()`) timed in ONE Python process by
//! the in-process gate's harness (the same file `kopt.bench(baseline=fn,
//! candidate=fn)` runs), then judged by `kopt_bench::gate`: the bench's
//! statistics and verdict, and SUSPECT for a candidate that games the timer.

use std::path::{Path, PathBuf};

use kopt_model::GateReport;

use crate::progress::Progress;
use crate::{Error, Result};

/// The harness, shared with the Python package (it imports nothing from kopt).
pub const HARNESS: &str = kopt_collect::module_script::GATE_HARNESS.1;

/// Two module scripts to compare in one process.
#[derive(Debug, Clone)]
pub struct GateScriptRequest {
    pub baseline: PathBuf,
    pub candidate: PathBuf,
    /// The class both scripts define.
    pub module: String,
    /// Python interpreter (with PyTorch).
    pub python: String,
    /// GPU the process uses (sets CUDA_VISIBLE_DEVICES).
    pub gpu: Option<String>,
    pub flush_l2: bool,
    pub checks: u32,
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    pub tol: Option<f64>,
    pub warmup: u32,
    pub min_samples: usize,
    pub min_time: f64,
    /// Seconds of timing in all (both sides, every mode).
    pub max_time: f64,
    pub noise_target: f64,
    /// kopt's tracer library (default: beside kopt, or $KOPT_TRACER); when
    /// found, the harness runs under it and the trace adds each timed
    /// call's kernels and the GPU work launched outside every timed call.
    pub tracer: Option<PathBuf>,
}

impl GateScriptRequest {
    pub fn validate(&self) -> Result<()> {
        for (flag, p) in [
            ("--script", &self.baseline),
            ("--candidate-script", &self.candidate),
        ] {
            if !p.is_file() {
                return Err(Error::Usage(format!(
                    "{flag} {}: no such file",
                    p.display()
                )));
            }
        }
        if !(self.threshold.is_finite() && (0.0..1.0).contains(&self.threshold)) {
            return Err(Error::Usage(format!(
                "--threshold {} is not between 0 and 1",
                self.threshold
            )));
        }
        if !(self.max_time.is_finite() && self.max_time > 0.0) {
            return Err(Error::Usage(
                "--gate-time must be a positive number of seconds".into(),
            ));
        }
        if self.checks < 2 {
            return Err(Error::Usage("the gate checks at least 2 calls".into()));
        }
        Ok(())
    }
}

/// Run the harness on both scripts and judge what it measured.
pub fn bench_scripts(req: &GateScriptRequest, progress: &dyn Progress) -> Result<GateReport> {
    req.validate()?;
    let dir = tempfile::Builder::new()
        .prefix("kopt-gate-")
        .tempdir()
        .map_err(|e| Error::Output(format!("a scratch folder for the gate: {e}")))?;
    let harness = dir.path().join("kopt_gate_harness.py");
    std::fs::write(&harness, HARNESS)
        .map_err(|e| Error::Output(format!("{}: {e}", harness.display())))?;
    let facts_path = dir.path().join("facts.json");
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut args: Vec<String> = vec![
        abs(&harness).display().to_string(),
        "--baseline".into(),
        abs(&req.baseline).display().to_string(),
        "--candidate".into(),
        abs(&req.candidate).display().to_string(),
        "--module".into(),
        req.module.clone(),
        "--out".into(),
        facts_path.display().to_string(),
    ];
    for (flag, value) in [
        ("--checks", req.checks.to_string()),
        ("--warmup", req.warmup.to_string()),
        ("--min-samples", req.min_samples.to_string()),
        ("--min-time", req.min_time.to_string()),
        ("--max-time", req.max_time.to_string()),
        ("--noise-target", req.noise_target.to_string()),
        ("--seed", req.seed.to_string()),
    ] {
        args.extend([flag.to_string(), value]);
    }
    if req.flush_l2 {
        args.push("--flush-l2".into());
    }
    let env: Vec<(String, String)> = req
        .gpu
        .iter()
        .map(|gpu| ("CUDA_VISIBLE_DEVICES".to_string(), gpu.clone()))
        .collect();
    progress.note(&format!(
        "timing {} against {} in one process",
        req.candidate.display(),
        req.baseline.display()
    ));
    let tracer = kopt_collect::trace::locate_tracer(req.tracer.as_deref()).ok();
    let mut timeline = None;
    let mut notes = Vec::new();
    match &tracer {
        Some(t) => {
            let argv: Vec<String> = std::iter::once(req.python.to_string())
                .chain(args.iter().cloned())
                .collect();
            let workload = kopt_collect::Workload {
                argv,
                gpu: req.gpu.clone(),
                timeout: None,
            };
            let on_line = |stream, line: &str| progress.workload_line(stream, line, true);
            match kopt_collect::trace::run_traced(&workload, t, None, dir.path(), &on_line) {
                Ok(run) => match kopt_ingest::kopt_trace::read_kopt_trace_set(&run.trace) {
                    Ok(tr) => timeline = Some(tr.timeline),
                    Err(e) => notes.push(format!(
                        "the tracer's trace could not be read ({e}): judged from CUDA events and host time"
                    )),
                },
                // The harness ran and finished, but CUPTI never attached.
                Err(kopt_collect::trace::TraceError::NoTrace(..)) => notes.push(
                    "kopt's tracer wrote no trace: judged from CUDA events and host time".into(),
                ),
                Err(e) => {
                    return Err(Error::WorkloadFailed(format!(
                        "the gate's harness ({} with both scripts) failed under kopt's tracer: {e}",
                        req.python
                    )))
                }
            }
        }
        None => {
            // Through the one runner: its own process group, output read
            // line by line (and logged), stopped on cancellation.
            let spec = kopt_collect::runner::RunSpec {
                program: PathBuf::from(&req.python),
                args,
                env,
                timeout: None,
                log: kopt_collect::runner::log_path(dir.path(), "gate_harness"),
            };
            let on_line = |stream, line: &str| progress.workload_line(stream, line, true);
            let outcome = kopt_collect::runner::run(&spec, &on_line).map_err(|e| {
                Error::ToolMissing(format!(
                    "cannot run {} (the Python with PyTorch): {e}",
                    req.python
                ))
            })?;
            if !outcome.success() {
                return Err(Error::WorkloadFailed(format!(
                    "the gate's harness ({} with both scripts) failed (exit {:?}, signal {:?}): {}",
                    req.python,
                    outcome.code,
                    outcome.signal,
                    outcome.tail.join("\n")
                )));
            }
        }
    }
    let text = std::fs::read_to_string(&facts_path)
        .map_err(|e| Error::WorkloadFailed(format!("the gate's harness wrote no facts ({e})")))?;
    let mut r = judge_facts(&text, req, timeline.as_ref())?;
    r.notes.extend(notes);
    Ok(r)
}

/// The verdict on facts the harness wrote (JSON), with the tracer's
/// kernel records when the harness ran under it.
pub fn judge_facts(
    text: &str,
    req: &GateScriptRequest,
    timeline: Option<&kopt_model::Timeline>,
) -> Result<GateReport> {
    let mut facts: kopt_bench::GateFacts = serde_json::from_str(text)
        .map_err(|e| Error::WorkloadFailed(format!("the gate's facts cannot be read: {e}")))?;
    if let Some(tl) = timeline {
        let note = if kopt_bench::gate::add_tracer_facts(&mut facts, tl) > 0 {
            "kopt's tracer recorded the run: kernels per timed call and work launched outside them counted"
        } else {
            "kopt's tracer recorded no timed call (NVTX ranges did not reach it): judged from CUDA events and host time"
        };
        facts
            .notes
            .retain(|n| !n.starts_with("kopt's tracer is not loaded"));
        facts.notes.push(note.into());
    }
    let peaks = facts
        .device
        .as_deref()
        .and_then(kopt_model::datasheet_peaks)
        .map(|(_, p)| p)
        .unwrap_or_default();
    let settings = kopt_bench::GateSettings {
        threshold: req.threshold,
        noise: req.noise,
        seed: req.seed,
        tol: req.tol,
        ..kopt_bench::GateSettings::default()
    };
    let mut r = kopt_bench::judge(&facts, &settings, &peaks).map_err(Error::WorkloadFailed)?;
    r.notes.extend(kopt_bench::gate::peak_notes(&facts, &peaks));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(dir: &Path) -> GateScriptRequest {
        let a = dir.join("a.py");
        let b = dir.join("b.py");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        GateScriptRequest {
            baseline: a,
            candidate: b,
            module: "Model".into(),
            python: "python3".into(),
            gpu: None,
            flush_l2: false,
            checks: 6,
            threshold: 0.05,
            noise: 0.01,
            seed: 42,
            tol: None,
            warmup: 3,
            min_samples: 20,
            min_time: 0.2,
            max_time: 2.0,
            noise_target: 0.005,
            tracer: None,
        }
    }

    #[test]
    fn the_harness_is_the_python_packages() {
        assert!(HARNESS.contains("def main(argv=None)"));
        assert!(HARNESS.contains("class Harness"));
    }

    #[test]
    fn clear_usage_errors() {
        let d = tempfile::tempdir().unwrap();
        let mut r = req(d.path());
        assert!(r.validate().is_ok());
        r.candidate = d.path().join("missing.py");
        let e = r.validate().unwrap_err().to_string();
        assert!(e.contains("--candidate-script"), "{e}");
        let mut r = req(d.path());
        r.max_time = 0.0;
        assert!(r.validate().is_err());
    }

    #[test]
    fn facts_judged_with_the_device_tables_peaks() {
        let d = tempfile::tempdir().unwrap();
        let r = req(d.path());
        let side = |t: f64| format!(r#"{{"name":"x","event_s":[{t},{t},{t},{t},{t}]}}"#);
        let text = format!(
            r#"{{"device":"NVIDIA H100 80GB HBM3","shapes":[{{"shape":"default","baseline":{},"candidate":{},"flops":1e12}}]}}"#,
            side(1e-3),
            side(1e-4)
        );
        let g = judge_facts(&text, &r, None).unwrap();
        // 10 PFLOP/s: above the H100's peak.
        assert_eq!(g.verdict, kopt_model::VerdictKind::Suspect);
        assert!(judge_facts("{", &r, None).is_err());
    }
}
