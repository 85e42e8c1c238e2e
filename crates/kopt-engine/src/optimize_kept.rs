//! The kept result of `kopt optimize` profiled: the module driver runs it
//! as the harness builds it (candidate or stack), once, under kopt's
//! tracer; its steady state (step time, launches, kernels, graph-replayed
//! kernel nodes by name) goes into the report beside the eager baseline's.
//! Below `optimize_run`, above the trace reader and the timeline analysis.

use std::path::Path;

use kopt_collect::{Stream, Workload};
use kopt_model::optimize::{KeptProfile, StepProfile};
use kopt_model::run_folder::TRACE_FILE;

use crate::module_script::PreparedScript;
use crate::optimize::OptimizeRequest;
use crate::progress::Progress;

/// Warm-up steps before the measured ones (the build, compile and capture
/// happen before the first of them).
const WARMUP: u32 = 3;

/// The first line of an error, for a report's one-line reason.
fn one_line(e: impl std::fmt::Display) -> String {
    let text = e.to_string();
    text.lines().next().unwrap_or("").trim().to_string()
}

/// The steady state of the trace in `dir`, or why there is none.
pub(crate) fn step_profile_of(dir: &Path) -> Result<StepProfile, String> {
    let path = dir.join(TRACE_FILE);
    if !path.is_file() {
        return Err(format!("no trace in {}", dir.display()));
    }
    let trace = kopt_ingest::read_kopt_trace_set(&path).map_err(one_line)?;
    if trace.timeline.activities.is_empty() {
        return Err(format!(
            "the trace {} recorded no GPU activity",
            path.display()
        ));
    }
    let mut p = kopt_analyze::timeline::step_profile(&trace.timeline).ok_or_else(|| {
        format!(
            "the trace {} has no steps to take a steady state from",
            path.display()
        )
    })?;
    p.run_dir = dir.display().to_string();
    Ok(p)
}

/// Trace `variant` (the report's `best`) of the prepared module script into
/// `run_dir/kept`, and read eager's steps from the baseline's trace. A
/// variant that cannot be traced is said in `error`, never fatal: the
/// measured verdicts stand without it.
pub(crate) fn profile_kept(
    req: &OptimizeRequest,
    prepared: &PreparedScript,
    module: &str,
    run_dir: &Path,
    variant: &str,
    progress: &dyn Progress,
) -> KeptProfile {
    let eager = step_profile_of(&prepared.run_dir);
    let kept = trace_variant(req, prepared, module, run_dir, variant, progress)
        .and_then(|()| step_profile_of(&run_dir.join("kept")));
    let mut errors = Vec::new();
    if let Err(e) = &kept {
        errors.push(format!(
            "the kept result ({variant}) could not be traced: {e}"
        ));
    }
    if let Err(e) = &eager {
        errors.push(format!("eager's baseline has no traced steps: {e}"));
    }
    KeptProfile {
        variant: variant.to_string(),
        eager: eager.ok(),
        kept: kept.ok(),
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

fn trace_variant(
    req: &OptimizeRequest,
    prepared: &PreparedScript,
    module: &str,
    run_dir: &Path,
    variant: &str,
    progress: &dyn Progress,
) -> Result<(), String> {
    let dir = run_dir.join("kept");
    let tracer = kopt_collect::trace::locate_tracer(req.tracer.as_deref()).map_err(one_line)?;
    let argv = crate::module_script::variant_argv(
        &dir,
        &prepared.script,
        module,
        &req.python,
        variant,
        WARMUP,
        req.steps,
    )
    .map_err(one_line)?;
    let workload = Workload {
        argv,
        gpu: req.gpu.clone(),
        timeout: req.timeout,
    };
    let passthrough = !req.quiet;
    let on_line = |s: Stream, l: &str| progress.workload_line(s, l, passthrough);
    kopt_collect::trace::run_traced(&workload, &tracer, None, &dir, &on_line)
        .map(|_| ())
        .map_err(one_line)
}
