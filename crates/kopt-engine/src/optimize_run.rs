//! `kopt optimize`'s run: the module's baseline profile and diagnosis,
//! the candidates it gives a reason for built and timed in the harness,
//! their verdicts, stacks and journal. Above `profile` (the baseline) and
//! `optimize` (candidates, harness, verdicts), which `profile --verify`
//! reads too.

use std::path::Path;

use kopt_model::optimize::OptimizeReport;
use kopt_model::Diagnosis;

use crate::error::{Error, Result};
use crate::optimize::{
    choose, judge_singles, judge_stacks, pick_best, plan_stacks, record, run_harness, Conclusion,
    OptimizeRequest, Variant,
};
use crate::profile_run::ProfileRequest;
use crate::progress::Progress;
use crate::workload::WorkloadOptions;

/// What tracing the kept result is expected to take: it is left out when
/// less of the budget is left.
const KEPT_PROFILE_S: std::time::Duration = std::time::Duration::from_secs(20);

pub fn optimize(req: &OptimizeRequest, progress: &dyn Progress) -> Result<OptimizeReport> {
    req.validate()?;
    if let Some(dir) = &req.conclude {
        return conclude_interrupted(req, dir, progress);
    }
    let started = std::time::Instant::now();
    let module = req.module_name();
    let mut source = module_script(req, &module)?;
    source.warmup = 3;
    source.steps = req.steps;
    // Without counters the baseline is the tracer's alone: a missing tracer
    // is said before anything is created.
    if !req.counters {
        kopt_collect::trace::locate_tracer(req.tracer.as_deref())?;
    }
    let (_, run_dir) = crate::run_folder::create_run_dir(&req.runs_dir)?;
    let baseline_dir = run_dir.join("baseline");
    let prepared = source.prepare_in(&baseline_dir, false)?;
    if !prepared.driven {
        return Err(Error::Usage(format!(
            "{}: kopt optimize needs a module script: an nn.Module class (Model) and get_inputs(), optionally get_init_inputs()",
            req.script.display()
        )));
    }

    // 1. Baseline: timeline and counters, and the diagnosis.
    progress.note("optimize 1/6: baseline profile");
    let diagnosis = baseline(req, &prepared, progress)?;
    // 2. Candidates from the diagnosis, within the budget that is left.
    let mut choices = choose(&diagnosis, &req.force, &req.skip);
    if kopt_collect::module_script::is_training_script(&source.text) {
        crate::optimize::restrict_to_training(&mut choices);
    }
    if let Some(budget) = req.budget {
        let left = budget.saturating_sub(started.elapsed()).as_secs_f64();
        crate::optimize::fit_budget(&mut choices, left, &req.force);
    }
    let singles: Vec<Variant> = choices
        .iter()
        .filter(|c| c.tried)
        .map(|c| Variant {
            parts: vec![c.candidate],
        })
        .collect();
    // 3. Build, check and time the singles in one process.
    let harness = if singles.is_empty() {
        None
    } else {
        progress.note(&format!(
            "optimize 2/6: building, checking and timing {} candidate(s): {}",
            singles.len(),
            singles
                .iter()
                .map(Variant::name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Some(run_harness(
            req,
            &prepared.script,
            &module,
            &singles,
            &run_dir.join("candidates"),
            progress,
        )?)
    };
    let setting = conclusion(req, module, &req.script, &run_dir, baseline_dir);
    progress.note("optimize 3/6: verdicts");
    let mut report = judge_singles(&setting, &diagnosis, &choices, harness.as_ref());
    // The verdicts so far are on disk before the stacks and the kept
    // result's trace run: a stop or a timeout after this keeps them.
    checkpoint(&report)?;
    // A stop (Ctrl-C, SIGTERM, the MCP budget) ends the run here: the
    // verdicts so far are recorded, nothing more is started.
    let stopped = kopt_collect::runner::cancel_requested();
    if stopped {
        report.baseline.notes.push(
            "The run was stopped: no stacks were measured and the kept result was not traced again."
                .into(),
        );
    }
    // 4. The kept ones stacked greedily, each stack gated and measured.
    let mut stacks = if req.stack && !stopped {
        plan_stacks(&report)
    } else {
        Vec::new()
    };
    // Stacks that would run past the budget are left out, and said.
    if let Some(budget) = req.budget.filter(|_| !stacks.is_empty()) {
        let left = budget.saturating_sub(started.elapsed()).as_secs_f64();
        let cost = crate::optimize::stacks_cost_s(&stacks);
        if cost > left {
            report.baseline.notes.push(format!(
                "The kept candidates were not stacked: measuring {} is expected to take about {cost:.0} s, {left:.0} s of the --budget was left.",
                stacks.iter().map(Variant::name).collect::<Vec<_>>().join(", ")
            ));
            stacks.clear();
        }
    }
    if !stacks.is_empty() {
        progress.note(&format!(
            "optimize 4/6: stacking the kept candidates: {}",
            stacks
                .iter()
                .map(Variant::name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let dir = run_dir.join("stacks");
        match run_harness(
            req,
            &prepared.script,
            &setting.module,
            &stacks,
            &dir,
            progress,
        ) {
            Ok(h) => judge_stacks(&setting, &mut report, &stacks, &h, &dir),
            // The singles stand; the stacks' failure is said, not fatal.
            Err(e) => report
                .baseline
                .notes
                .push(format!("Stacking the kept candidates failed: {e}")),
        }
    }
    pick_best(&mut report);
    checkpoint(&report)?;
    // 5. The kept result once more under the tracer: where its time went;
    // not when the budget is spent (a traced run takes seconds to minutes).
    // The kept result is built again for its trace: a compile form
    // compiles again (a 1B-class prefill's took the run 2 s past 120 s).
    let kept_cost = report.best.as_deref().map_or(KEPT_PROFILE_S, |best| {
        let kept = Variant {
            parts: best
                .split('+')
                .filter_map(crate::Candidate::from_name)
                .collect(),
        };
        KEPT_PROFILE_S + std::time::Duration::from_secs_f64(crate::optimize::stacks_cost_s(&[kept]))
    });
    let budget_spent = req
        .budget
        .is_some_and(|b| started.elapsed() + kept_cost >= b);
    if budget_spent && report.best.is_some() && req.profile_kept {
        report
            .baseline
            .notes
            .push("The kept result was not traced again: the --budget was spent.".into());
    }
    if let Some(best) = report
        .best
        .clone()
        .filter(|_| req.profile_kept && !budget_spent && !stopped)
    {
        progress.note(&format!(
            "optimize 5/6: tracing the kept result ({best}) for its timeline and kernels"
        ));
        report.kept_profile = Some(crate::optimize_kept::profile_kept(
            req,
            &prepared,
            &setting.module,
            &run_dir,
            &best,
            progress,
        ));
    }
    // 6. Journal, history, the report in the run folder.
    progress.note("optimize 6/6: journal and history");
    record(&setting, &report, progress)?;
    Ok(report)
}

/// The report so far as the run folder's optimize.json, written whole
/// (a temporary file renamed over it): the final record overwrites it.
fn checkpoint(report: &OptimizeReport) -> Result<()> {
    let path = Path::new(&report.run_dir).join("optimize.json");
    let tmp = path.with_extension("json.partial");
    let json = serde_json::to_vec_pretty(report).map_err(|e| Error::Output(e.to_string()))?;
    std::fs::write(&tmp, json).map_err(|e| crate::error::io_error(&tmp, "write", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| crate::error::io_error(&path, "write", e))
}

/// The module script, read as `--script` reads a script (a regular
/// file within the size cap, UTF-8) and refused unless it is a module
/// script: all before the run folder exists.
fn module_script(req: &OptimizeRequest, module: &str) -> Result<crate::workload::ScriptSource> {
    match crate::workload::Workload::from_script_file(&req.script, &req.python, Some(module), false)? {
        crate::workload::Workload::Script(s) => Ok(s),
        crate::workload::Workload::Command(_) => Err(Error::Usage(format!(
            "{}: kopt optimize needs a module script: an nn.Module class (Model) and get_inputs(), optionally get_init_inputs()",
            req.script.display()
        ))),
    }
}

/// The baseline profile: the tracer's timeline and, with ncu, counters on
/// the hot kernels; without ncu, the timeline alone (said in the notes).
fn baseline(
    req: &OptimizeRequest,
    prepared: &crate::module_script::PreparedScript,
    progress: &dyn Progress,
) -> Result<Diagnosis> {
    let run = WorkloadOptions {
        workload: crate::workload::Workload::Command(prepared.argv.clone()),
        gpu: req.gpu.clone(),
        timeout: req.timeout,
        quiet: req.quiet,
        tracer: req.tracer.clone(),
        runs_dir: Some(req.runs_dir.clone()),
        db: Some(req.db.clone()),
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

/// `kopt optimize --conclude RUN_DIR`: the verdicts of a run that was
/// killed (SIGKILL, a lost machine) after its harness measured candidates
/// but before kopt judged them. The harness's checkpoint
/// (`candidates/result.json`) holds the samples so far; the baseline
/// folder gives the diagnosis and the module. Judged and recorded (report,
/// journal, history) as the run itself would have; the stopped timing is
/// said. A folder whose verdicts are already written is refused.
fn conclude_interrupted(
    req: &OptimizeRequest,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<OptimizeReport> {
    let what = |why: &str| Error::Usage(format!("--conclude {}: {why}", dir.display()));
    if !dir.is_dir() {
        return Err(what("not a folder"));
    }
    let result = dir.join("candidates/result.json");
    let baseline_dir = dir.join("baseline");
    if !result.is_file() || !baseline_dir.is_dir() {
        return Err(what(
            "not a kopt optimize run folder whose harness measured anything (baseline/ and candidates/result.json)",
        ));
    }
    if dir.join("optimize.json").exists() {
        return Err(what(
            "its verdicts are already written (optimize.json); `kopt history` lists the run",
        ));
    }
    let record = crate::run_folder::read_record(&baseline_dir)?
        .ok_or_else(|| what("baseline/run.json is missing"))?;
    let (_, script, module) = kopt_collect::module_script::driven_script(&record.argv)
        .ok_or_else(|| what("baseline/run.json does not run kopt's module driver"))?;
    let diagnosis = crate::diagnose::diagnose(
        kopt_ingest::read_run_folder_filtered(&baseline_dir)?,
        &Default::default(),
    );
    let force = crate::optimize::candidates_in_result(&result)?;
    let setting = conclusion(req, module, &script, dir, baseline_dir);
    progress.note(&format!(
        "concluding {}: judging what its harness measured before the run ended",
        dir.display()
    ));
    crate::optimize::conclude_from_folder(&setting, &diagnosis, &force, progress)
}

/// How a run's verdicts are reached and recorded: the request's verdict
/// settings for `module` of `script` in `run_dir`.
fn conclusion(
    req: &OptimizeRequest,
    module: String,
    script: &Path,
    run_dir: &Path,
    baseline_dir: std::path::PathBuf,
) -> Conclusion {
    Conclusion {
        module,
        script: script.display().to_string(),
        run_dir: run_dir.to_path_buf(),
        baseline_dir,
        threshold: req.threshold,
        noise: req.noise,
        seed: req.seed,
        allow_precision: req.allow_precision,
        journal: req.journal.clone(),
        db: Some(req.db.clone()),
    }
}
