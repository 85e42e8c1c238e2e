//! `kopt optimize`: the loop of seed 000 without a human. Profile the
//! module, choose the mechanical fixes the diagnosis gives a reason for (CUDA
//! graph capture, torch.compile modes), build each, check it against eager on
//! fresh inputs, time all interleaved in one process, then keep or revert
//! each with the bench statistics, journal every attempt, and report the
//! measured speed-up next to the predicted one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kopt_collect::runner::{self, RunSpec};
use kopt_model::compare::CompareReport;
use kopt_model::optimize::{Baseline, CandidateFailure, CandidateResult, OptimizeReport};
use kopt_model::{BottleneckClass, Diagnosis, Verdict, VerdictKind};
use serde::Deserialize;

use crate::bench::{decide_all, Decision, Measured};
use crate::error::{Error, Result};
use crate::profile_run::ProfileRequest;
use crate::progress::Progress;
use crate::workload::WorkloadOptions;

/// The mechanical fixes kopt can apply to a PyTorch module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Candidate {
    /// CUDA graph capture of the forward.
    Graph,
    /// torch.compile(mode="reduce-overhead").
    CompileReduceOverhead,
    /// torch.compile(mode="max-autotune-no-cudagraphs").
    CompileMaxAutotune,
    /// The two above combined: compiled kernels replayed from kopt's graph.
    CompileMaxAutotuneGraph,
}

impl Candidate {
    pub const ALL: [Candidate; 4] = [
        Candidate::Graph,
        Candidate::CompileReduceOverhead,
        Candidate::CompileMaxAutotune,
        Candidate::CompileMaxAutotuneGraph,
    ];

    /// The harness's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Candidate::Graph => "graph",
            Candidate::CompileReduceOverhead => "compile_reduce_overhead",
            Candidate::CompileMaxAutotune => "compile_max_autotune",
            Candidate::CompileMaxAutotuneGraph => "compile_max_autotune_graph",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Candidate::Graph => "CUDA graph capture of the forward (static inputs, warm-up on a side stream, replay)",
            Candidate::CompileReduceOverhead => "torch.compile(mode=\"reduce-overhead\"): Inductor kernels replayed from CUDA graphs",
            Candidate::CompileMaxAutotune => "torch.compile(mode=\"max-autotune-no-cudagraphs\"): Inductor kernels, autotuned",
            Candidate::CompileMaxAutotuneGraph => "torch.compile(mode=\"max-autotune-no-cudagraphs\") replayed from a CUDA graph",
        }
    }

    /// Whether it removes per-launch cost (the graph forms).
    fn removes_launches(self) -> bool {
        self != Candidate::CompileMaxAutotune
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OptimizeRequest {
    /// A module script (KernelBench convention).
    pub script: PathBuf,
    /// The class to pick and the run's label (default: the script's stem).
    pub module: Option<String>,
    pub python: String,
    pub gpu: Option<String>,
    /// Per process (the baseline profile's passes, the harness).
    pub timeout: Option<Duration>,
    pub quiet: bool,
    pub tracer: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    /// Counters on the hot kernels too (ncu); else the timeline only.
    pub counters: bool,
    /// Try these whatever the diagnosis says (empty: let it choose).
    pub force: Vec<Candidate>,
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    pub min_samples: usize,
    pub max_time_s: f64,
    pub noise_target: f64,
    /// Profile steps of the baseline.
    pub steps: u32,
    pub runs_dir: PathBuf,
    pub db: PathBuf,
    /// Journal entries go here (None: no journal).
    pub journal: Option<PathBuf>,
}

impl OptimizeRequest {
    /// A request with the CLI's defaults.
    pub fn new(script: PathBuf) -> OptimizeRequest {
        let paths = crate::record::RecordPaths::current();
        OptimizeRequest {
            script,
            module: None,
            python: "python3".into(),
            gpu: None,
            timeout: None,
            quiet: false,
            tracer: None,
            ncu: None,
            counters: true,
            force: Vec::new(),
            threshold: 0.05,
            noise: 0.01,
            seed: 42,
            min_samples: 30,
            max_time_s: 20.0,
            noise_target: 0.01,
            steps: 20,
            runs_dir: paths.runs_dir,
            db: paths.db,
            journal: Some(paths.journal),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(Error::Usage("--threshold must be in (0, 1)".into()));
        }
        if !(self.max_time_s > 0.0 && self.max_time_s.is_finite()) {
            return Err(Error::Usage(
                "--max-time must be a positive number of seconds".into(),
            ));
        }
        if self.max_time_s > crate::profile::MAX_SECONDS {
            return Err(Error::Usage(format!(
                "--max-time must be at most {:e} seconds, got {:e}",
                crate::profile::MAX_SECONDS,
                self.max_time_s
            )));
        }
        if self.min_samples < 2 {
            return Err(Error::Usage("--min-samples must be at least 2".into()));
        }
        if self.steps == 0 {
            return Err(Error::Usage("--steps must be at least 1".into()));
        }
        Ok(())
    }

    fn module_name(&self) -> String {
        self.module.clone().unwrap_or_else(|| {
            self.script
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "module".into())
        })
    }
}

/// A candidate as the diagnosis sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub candidate: Candidate,
    pub tried: bool,
    pub reason: String,
    pub predicted_speedup: Option<f64>,
    pub prediction_model: Option<String>,
}

/// Which candidates the diagnosis gives a reason for, and what it predicts.
pub fn choose(d: &Diagnosis, force: &[Candidate]) -> Vec<Choice> {
    let timeline = d.timeline.as_ref();
    let busy = timeline.map(|t| t.busy_pct);
    let launch_bound = timeline.is_some_and(|t| t.launch_bound)
        || d.primary
            .as_ref()
            .is_some_and(|p| p.class == BottleneckClass::LaunchOverhead);
    let busy_text = busy.map_or("GPU busy share unknown (no timeline)".to_string(), |b| {
        format!("GPU busy {b:.1}% of the steady-state window")
    });
    // The timeline report's bound on graph capture: wall time cannot fall
    // below GPU-busy time, so the step is at most wall/busy times faster.
    let graph_rec = d
        .recommendations
        .iter()
        .find(|r| r.id == "capture_cuda_graph");
    // The timeline's graph-capture model (per-step GPU time plus replay
    // cost, against the eager step without the recorder's cost); else the
    // older bound from the gain (wall time cannot fall below busy time).
    // A recommendation whose range spans more than 3x carries no figure;
    // the timeline's model still orders the candidates.
    let timeline_prediction = d
        .timeline
        .as_ref()
        .and_then(|t| t.graph_prediction.as_ref())
        .map(|g| &g.speedup);
    let graph_prediction = graph_rec.and_then(|r| {
        r.predicted_speedup
            .as_ref()
            .or(timeline_prediction)
            .map(|p| {
                (
                    p.estimate,
                    format!("{} (range {:.2}x to {:.2}x)", p.model, p.low, p.high),
                )
            })
            .or_else(|| {
                r.gain
                    .as_ref()
                    .filter(|g| g.workload_pct > 0.0 && g.workload_pct < 100.0)
                    .map(|g| (100.0 / (100.0 - g.workload_pct), g.method.clone()))
            })
    });
    let fusion = d
        .recommendations
        .iter()
        .any(|r| r.id.contains("fuse") || r.title.to_ascii_lowercase().contains("fuse"));
    Candidate::ALL
        .iter()
        .map(|&c| {
            let (mut tried, mut reason) = match (c, launch_bound) {
                (Candidate::CompileMaxAutotune, true) => (false, format!("launch bound ({busy_text}): faster kernels cannot help while launches set the pace")),
                (Candidate::CompileMaxAutotune, false) => (true, format!("kernels rather than launches set the pace ({busy_text}): Inductor's autotuned kernels may be faster")),
                (Candidate::CompileMaxAutotuneGraph, true) if !fusion => (false, "launch bound, but no fusion finding: compiling first adds nothing a plain graph does not".to_string()),
                (_, true) => (true, format!("launch bound ({busy_text}): replaying the step from a CUDA graph removes the per-launch cost")),
                (_, false) => (false, format!("{busy_text}: launches do not set the pace, so a CUDA graph would save almost nothing")),
            };
            if force.contains(&c) && !tried {
                tried = true;
                reason = format!("asked for with --candidate (the diagnosis alone would skip it: {reason})");
            }
            let (predicted_speedup, prediction_model) = match (c.removes_launches(), &graph_prediction) {
                (true, Some((s, m))) => (Some(*s), Some(m.clone())),
                _ => (None, None),
            };
            Choice {
                candidate: c,
                tried,
                reason,
                predicted_speedup,
                prediction_model,
            }
        })
        .collect()
}

#[derive(Debug, Deserialize)]
struct HarnessCandidate {
    description: String,
    status: String,
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct HarnessResult {
    device: Option<String>,
    candidates: BTreeMap<String, HarnessCandidate>,
    samples_ns: BTreeMap<String, Vec<f64>>,
}

pub fn optimize(req: &OptimizeRequest, progress: &dyn Progress) -> Result<OptimizeReport> {
    req.validate()?;
    let text = read_script(&req.script)?;
    let module = req.module_name();
    let (_, run_dir) = crate::run_folder::create_run_dir(&req.runs_dir)?;
    let baseline_dir = run_dir.join("baseline");
    let prepared = crate::module_script::prepare(
        &baseline_dir,
        &text,
        &module,
        &req.python,
        3,
        req.steps,
        false,
    )?;
    if !prepared.driven {
        return Err(Error::Usage(format!(
            "{}: kopt optimize needs a module script: an nn.Module class (Model) and get_inputs(), optionally get_init_inputs()",
            req.script.display()
        )));
    }

    // 1. Baseline: timeline and counters, and the diagnosis.
    progress.note("optimize 1/4: baseline profile");
    let diagnosis = baseline(req, &prepared, progress)?;
    // 2. Candidates from the diagnosis.
    let choices = choose(&diagnosis, &req.force);
    let tried: Vec<&Choice> = choices.iter().filter(|c| c.tried).collect();
    // 3-4. Build, check and time the candidates in one process.
    let harness = if tried.is_empty() {
        None
    } else {
        progress.note(&format!(
            "optimize 2/4: building, checking and timing {} candidate(s): {}",
            tried.len(),
            tried
                .iter()
                .map(|c| c.candidate.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Some(run_harness(
            req, &prepared, &module, &tried, &run_dir, progress,
        )?)
    };
    let setting = Conclusion {
        module,
        script: req.script.display().to_string(),
        run_dir,
        baseline_dir,
        threshold: req.threshold,
        noise: req.noise,
        seed: req.seed,
        journal: req.journal.clone(),
        db: req.db.clone(),
    };
    conclude(&setting, &diagnosis, &choices, harness.as_ref(), progress)
}

/// What the verdict half of optimize needs beside the harness's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Conclusion {
    pub module: String,
    /// The script, as the report names it.
    pub script: String,
    /// The run folder; the harness wrote into `candidates/` under it.
    pub run_dir: PathBuf,
    pub baseline_dir: PathBuf,
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    pub journal: Option<PathBuf>,
    pub db: PathBuf,
}

/// The verdicts from what a harness left in `run_dir/candidates/`
/// (`result.json`, `reference.safetensors`, `<candidate>.safetensors`):
/// the Python package runs the harness in its own process and ends here.
pub fn conclude_from_folder(
    setting: &Conclusion,
    diagnosis: &Diagnosis,
    force: &[Candidate],
    progress: &dyn Progress,
) -> Result<OptimizeReport> {
    let choices = choose(diagnosis, force);
    let path = setting.run_dir.join("candidates/result.json");
    let harness = if choices.iter().any(|c| c.tried) {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::WorkloadFailed(format!("{}: {e}", path.display())))?;
        Some(
            serde_json::from_str(&text)
                .map_err(|e| Error::WorkloadFailed(format!("{}: {e}", path.display())))?,
        )
    } else {
        None
    };
    conclude(setting, diagnosis, &choices, harness.as_ref(), progress)
}

fn conclude(
    setting: &Conclusion,
    diagnosis: &Diagnosis,
    choices: &[Choice],
    harness: Option<&HarnessResult>,
    progress: &dyn Progress,
) -> Result<OptimizeReport> {
    let module = &setting.module;
    let run_dir = &setting.run_dir;
    let tried: Vec<&Choice> = choices.iter().filter(|c| c.tried).collect();
    let mut report = OptimizeReport {
        schema: kopt_model::SCHEMA.into(),
        module: module.clone(),
        script: setting.script.clone(),
        run_dir: run_dir.display().to_string(),
        device: Some(diagnosis.device.name.clone()),
        baseline: Baseline {
            primary_component: diagnosis
                .primary
                .as_ref()
                .map(|p| p.component_short.clone()),
            primary_type: diagnosis.primary.as_ref().map(|p| p.class),
            busy_pct: diagnosis.timeline.as_ref().map(|t| t.busy_pct),
            launch_bound: diagnosis.timeline.as_ref().is_some_and(|t| t.launch_bound),
            run_dir: setting.baseline_dir.display().to_string(),
            notes: diagnosis.notes.clone(),
        },
        candidates: Vec::new(),
        best: None,
        ablation: None,
    };
    // 5. Verdicts.
    progress.note("optimize 3/4: verdicts");
    let cand_dir = run_dir.join("candidates");
    let mut measured = Vec::new();
    if let Some(h) = harness {
        if let Some(eager) = h.samples_ns.get("eager") {
            measured.push(Measured {
                name: "eager".into(),
                command: format!("{module} (eager)"),
                samples: eager.iter().map(|ns| ns / 1e9).collect(),
                correct: None,
                check_problems: Vec::new(),
            });
        }
        report.device = h.device.clone().or(report.device);
    }
    let mut correctness: BTreeMap<&str, CompareReport> = BTreeMap::new();
    for c in &tried {
        let name = c.candidate.name();
        let Some(h) = harness else { continue };
        let Some(samples) = h.samples_ns.get(name) else {
            continue;
        };
        let check = check_outputs(&cand_dir, name);
        measured.push(Measured {
            name: name.into(),
            command: c.candidate.describe().into(),
            samples: samples.iter().map(|ns| ns / 1e9).collect(),
            correct: Some(check.passed),
            check_problems: check_problems(&check),
        });
        correctness.insert(name, check);
    }
    let ablation = (measured.len() >= 2).then(|| {
        decide_all(
            &measured,
            &Decision {
                threshold: setting.threshold,
                noise: setting.noise,
                seed: setting.seed,
            },
            "GPU time per step (CUDA events around each forward, one process, variants interleaved, no tracer)",
            report.device.clone(),
        )
    });
    for c in choices {
        let name = c.candidate.name();
        let from_harness = harness.and_then(|h| h.candidates.get(name));
        let failure = from_harness
            .filter(|hc| hc.status != "ok")
            .map(|hc| CandidateFailure {
                phase: hc.phase.clone().unwrap_or_else(|| "run".into()),
                error: hc.error.clone().unwrap_or_else(|| "failed".into()),
            });
        let variant = ablation
            .as_ref()
            .and_then(|a| a.variants.iter().find(|v| v.name == name));
        let verdict = match (&failure, variant) {
            (Some(f), _) => Some(Verdict {
                kind: VerdictKind::Revert,
                reason: format!("could not {}: {}", f.phase, f.error),
                next: "the run went on with the other candidates".into(),
            }),
            (None, Some(v)) => v.verdict.clone(),
            (None, None) if c.tried => Some(Verdict {
                kind: VerdictKind::Revert,
                reason: "no timing came back for it".into(),
                next: "see the harness log in the run folder".into(),
            }),
            _ => None,
        };
        report.candidates.push(CandidateResult {
            name: name.into(),
            description: from_harness
                .map(|h| h.description.clone())
                .unwrap_or_else(|| c.candidate.describe().into()),
            tried: c.tried,
            reason: c.reason.clone(),
            predicted_speedup: c.predicted_speedup,
            prediction_model: c.prediction_model.clone(),
            failure,
            correctness: correctness.remove(name),
            measured_speedup: variant.map(|v| v.speedup_vs_first),
            verdict,
        });
    }
    report.best = report
        .candidates
        .iter()
        .filter(|c| {
            c.verdict
                .as_ref()
                .is_some_and(|v| v.kind == VerdictKind::Keep)
        })
        .max_by(|a, b| {
            a.measured_speedup
                .unwrap_or(0.0)
                .total_cmp(&b.measured_speedup.unwrap_or(0.0))
        })
        .map(|c| c.name.clone());
    report.ablation = ablation;
    // 6. Journal, history, the report in the run folder.
    progress.note("optimize 4/4: journal and history");
    record(setting, &report, progress)?;
    Ok(report)
}

fn read_script(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Usage(format!("--script {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "--script {}: not a regular file",
            path.display()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))
}

/// The baseline profile: the tracer's timeline and, with ncu, counters on
/// the hot kernels; without ncu, the timeline alone (said in the notes).
fn baseline(
    req: &OptimizeRequest,
    prepared: &crate::module_script::PreparedScript,
    progress: &dyn Progress,
) -> Result<Diagnosis> {
    let run = WorkloadOptions {
        argv: prepared.argv.clone(),
        gpu: req.gpu.clone(),
        timeout: req.timeout,
        quiet: req.quiet,
        tracer: req.tracer.clone(),
        runs_dir: req.runs_dir.clone(),
        db: req.db.clone(),
        run_dir: Some(prepared.run_dir.clone()),
    };
    if req.counters {
        let mut p = ProfileRequest::new(prepared.argv.clone());
        p.run = run.clone();
        p.module = req.module.clone();
        p.ncu = req.ncu.clone();
        // optimize measures the fixes bare itself.
        p.bare_run = false;
        match crate::profile::profile(&p, progress) {
            Ok(d) => return Ok(d),
            Err(Error::ToolMissing(why)) => {
                progress.note(&format!("{why}; the baseline is the timeline alone"));
            }
            Err(e) => return Err(e),
        }
    }
    let t = crate::trace::TraceRequest {
        run,
        sample: None,
        keep_timeline: false,
        // optimize measures the fixes bare itself.
        bare_run: false,
        analysis: Default::default(),
    };
    let mut d = crate::trace::trace(&t, progress)?.diagnosis;
    d.notes.push("No counters were collected for the baseline (no ncu, or --no-counters): the diagnosis rests on the timeline.".into());
    Ok(d)
}

fn run_harness(
    req: &OptimizeRequest,
    prepared: &crate::module_script::PreparedScript,
    module: &str,
    tried: &[&Choice],
    run_dir: &Path,
    progress: &dyn Progress,
) -> Result<HarnessResult> {
    let dir = run_dir.join("candidates");
    std::fs::create_dir_all(&dir).map_err(|e| crate::error::io_error(&dir, "create", e))?;
    let harness = crate::module_script::write_harness(&dir)?;
    let names: Vec<&str> = tried.iter().map(|c| c.candidate.name()).collect();
    let spec = RunSpec {
        program: PathBuf::from(&req.python),
        args: vec![
            harness.display().to_string(),
            prepared.script.display().to_string(),
            module.to_string(),
            names.join(","),
            dir.display().to_string(),
            req.min_samples.to_string(),
            req.max_time_s.to_string(),
            req.noise_target.to_string(),
        ],
        env: req
            .gpu
            .iter()
            .map(|g| ("CUDA_VISIBLE_DEVICES".to_string(), g.clone()))
            .collect(),
        timeout: req.timeout,
        log: dir.join("harness.log"),
    };
    let passthrough = !req.quiet;
    let on_line = |s, l: &str| progress.workload_line(s, l, passthrough);
    let outcome = runner::run(&spec, &on_line)
        .map_err(|e| Error::WorkloadFailed(format!("cannot start {}: {e}", req.python)))?;
    if outcome.timed_out {
        return Err(Error::WorkloadFailed(format!(
            "the optimize harness timed out; kopt killed its process group (log: {})",
            spec.log.display()
        )));
    }
    if !outcome.success() {
        let tail: Vec<&str> = outcome
            .tail
            .iter()
            .rev()
            .take(4)
            .map(String::as_str)
            .collect();
        return Err(Error::WorkloadFailed(format!(
            "the optimize harness failed ({}): {} (log: {})",
            outcome
                .code
                .map_or("killed".into(), |c| format!("exit {c}")),
            tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
            spec.log.display()
        )));
    }
    let path = dir.join("result.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::WorkloadFailed(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::WorkloadFailed(format!("{}: {e}", path.display())))
}

/// A candidate's outputs against eager's, with kopt compare's rules.
fn check_outputs(dir: &Path, name: &str) -> CompareReport {
    let read = |f: &str| kopt_ingest::tensor::read_tensors(&dir.join(f));
    match (
        read("reference.safetensors"),
        read(&format!("{name}.safetensors")),
    ) {
        (Ok(r), Ok(c)) => kopt_bench::compare_tensors(&r, &c, None, false),
        (r, c) => CompareReport {
            schema: kopt_model::SCHEMA.into(),
            passed: false,
            tensors: Vec::new(),
            problems: [r.err(), c.err()]
                .into_iter()
                .flatten()
                .map(|e| e.to_string())
                .collect(),
        },
    }
}

fn check_problems(r: &CompareReport) -> Vec<String> {
    let mut p = r.problems.clone();
    for t in &r.tensors {
        p.extend(t.problems.iter().map(|x| format!("{}: {x}", t.name)));
    }
    p
}

fn record(req: &Conclusion, r: &OptimizeReport, progress: &dyn Progress) -> Result<()> {
    let json = serde_json::to_string_pretty(r).map_err(|e| Error::Output(e.to_string()))?;
    let path = Path::new(&r.run_dir).join("optimize.json");
    std::fs::write(&path, &json).map_err(|e| crate::error::io_error(&path, "write", e))?;
    if let Some(journal) = &req.journal {
        for c in r.candidates.iter().filter(|c| c.tried) {
            let outcome = match (&c.failure, c.measured_speedup, &c.correctness) {
                (Some(f), _, _) => format!("could not {}: {}", f.phase, f.error),
                (None, Some(s), check) => format!(
                    "measured {s:.2}x vs eager on {}; correctness {}",
                    r.device.as_deref().unwrap_or("the GPU"),
                    match check {
                        Some(c) if c.passed => "PASS",
                        _ => "FAIL",
                    }
                ),
                _ => "no measurement".into(),
            };
            let entry = kopt_store::Entry {
                when: crate::run_folder::journal_timestamp(std::time::SystemTime::now()),
                hypothesis: format!("{} for {}: {}", c.description, r.module, c.reason),
                prediction: c.predicted_speedup.map(|p| {
                    format!(
                        "{p:.2}x faster per step ({})",
                        c.prediction_model.as_deref().unwrap_or("timeline model")
                    )
                }),
                outcome: Some(outcome),
                verdict: c.verdict.as_ref().map(|v| v.kind.as_str().to_string()),
                run: Some(r.run_dir.clone()),
            };
            kopt_store::append_entry(journal, &entry)?;
        }
    }
    let summary = match (
        &r.best,
        r.candidates
            .iter()
            .find(|c| Some(&c.name) == r.best.as_ref()),
    ) {
        (Some(b), Some(c)) => format!(
            "best {b}: {:.2}x measured{}",
            c.measured_speedup.unwrap_or(f64::NAN),
            c.predicted_speedup
                .map_or(String::new(), |p| format!(" (predicted up to {p:.2}x)"))
        ),
        _ => "no candidate kept".into(),
    };
    let mut row = crate::record::run_row(
        "optimize",
        format!("kopt optimize --script {} --module {}", r.script, r.module),
        summary,
    );
    row.device = r.device.clone();
    row.run_dir = Some(r.run_dir.clone());
    row.verdict = Some(if r.best.is_some() { "KEEP" } else { "REVERT" }.into());
    row.report_json = Some(json);
    crate::record::record_run(&req.db, &row, progress);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnosis(path: &str) -> Diagnosis {
        let req = crate::AnalyzeRequest {
            files: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures")
                .join(path)],
            ..Default::default()
        };
        crate::analyze(&req, &crate::Silent).unwrap()
    }

    fn tried(choices: &[Choice]) -> Vec<&'static str> {
        choices
            .iter()
            .filter(|c| c.tried)
            .map(|c| c.candidate.name())
            .collect()
    }

    #[test]
    fn a_launch_bound_module_gets_the_graph_forms_with_a_prediction() {
        let d = diagnosis("profile-module-h200/run");
        let c = choose(&d, &[]);
        let t = tried(&c);
        assert!(
            t.contains(&"graph") && t.contains(&"compile_reduce_overhead"),
            "{t:?}"
        );
        assert!(!t.contains(&"compile_max_autotune"), "{t:?}");
        let graph = c.iter().find(|c| c.candidate == Candidate::Graph).unwrap();
        let p = graph.predicted_speedup.unwrap();
        assert!(p > 2.0, "{p}");
        assert!(graph.reason.contains("launch bound"), "{}", graph.reason);
        let skipped = c
            .iter()
            .find(|c| c.candidate == Candidate::CompileMaxAutotune)
            .unwrap();
        assert!(skipped.reason.contains("cannot help"), "{}", skipped.reason);
    }

    #[test]
    fn a_busy_gpu_gets_no_graph_candidate() {
        // The labeled suite's counters: no timeline, nothing launch bound.
        let d = diagnosis("labeled-suite-h100/ncu_raw_base.csv");
        let c = choose(&d, &[]);
        assert_eq!(tried(&c), ["compile_max_autotune"]);
        let graph = c.iter().find(|c| c.candidate == Candidate::Graph).unwrap();
        assert!(
            graph.reason.contains("launches do not set the pace"),
            "{}",
            graph.reason
        );
        // --candidate forces one, and says the diagnosis would have skipped it.
        let forced = choose(&d, &[Candidate::Graph]);
        let g = forced
            .iter()
            .find(|c| c.candidate == Candidate::Graph)
            .unwrap();
        assert!(g.tried && g.reason.starts_with("asked for"), "{}", g.reason);
    }

    #[test]
    fn a_plain_script_is_refused_with_the_convention() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("plain.py");
        std::fs::write(&script, "print('hello')\n").unwrap();
        let mut req = OptimizeRequest::new(script);
        req.runs_dir = d.path().join("runs");
        req.db = d.path().join("h.db");
        req.journal = None;
        let err = optimize(&req, &crate::Silent).unwrap_err();
        assert!(matches!(err, Error::Usage(_)));
        assert!(err.to_string().contains("get_inputs()"), "{err}");
    }

    #[test]
    fn a_failed_harness_candidate_is_revert_with_its_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("reference.safetensors"), b"").unwrap();
        let r = check_outputs(d.path(), "graph");
        assert!(!r.passed && !r.problems.is_empty());
    }
}
