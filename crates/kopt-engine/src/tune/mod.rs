//! `kopt tune`: a parameter sweep over a command template, each trial timed
//! with the bench engine's sources and stopping rule.
//!
//! The space ([`space`]): parameters with lists and ranges, constraints in a
//! small expression language (no eval). Strategies: grid, random and
//! successive halving (the bootstrap interval decides who survives). Every
//! trial's output is compared with the baseline config's (`--check`); a
//! failing, timing-out or wrong config is recorded and skipped. Each trial
//! is committed to the cache (`kopt_store::TuneCache`) as it finishes, so a
//! second sweep measures nothing already measured and a killed one loses no
//! finished trial. Trials run through an [`Executor`]: [`LocalExecutor`]
//! runs one worker thread per GPU (each trial with its own
//! `CUDA_VISIBLE_DEVICES`); the Python package plugs in Ray. The best
//! configs are then timed interleaved on one GPU ([`crate::bench::run_bench`]) so the
//! verdict is not a cross-GPU artefact.
//!
//! Along the data flow: `request.rs` (what is asked), `space.rs` (the
//! space, from kopt-space), `state.rs` (the trials and the driver),
//! `strategies.rs` (which trials run when), `jobs.rs` (what goes to a
//! worker and comes back), `executor.rs` and `trial.rs` (workers running
//! and timing trials), `gpu.rs` (this host's GPUs), `driver.rs` (outcomes
//! folded back, the final comparison, the report), `cache.rs` (the tune
//! cache and the history).

use std::collections::BTreeMap;
use std::time::Instant;

use kopt_model::tune::{TrialStatus, TuneReport};
use kopt_store::{TrialKey, TuneCache};

use crate::error::{Error, Result};
use crate::progress::Progress;

mod cache;
mod driver;
mod executor;
mod gpu;
mod jobs;
mod request;
pub mod space;
mod state;
mod strategies;
mod trial;

pub use cache::{cached_winners, record};
pub use executor::{Executor, LocalExecutor, SamplerFactory};
pub use gpu::{query_device, visible_gpus};
pub use jobs::{FinalJob, StopSpec, TimingSpec, TrialJob, TrialOutcome};
pub use request::{canonical, Strategy, TuneRequest, CHECK_PLACEHOLDER, MAX_POINTS};
pub use space::{Expr, Param, Space};
pub use trial::{run_final_job, run_trial_job};

use jobs::choice_name;
use state::{Driver, Trial};
use strategies::SplitMix;

/// The sweep with real processes on this host's GPUs.
pub fn tune(req: &TuneRequest, progress: &dyn Progress) -> Result<TuneReport> {
    req.validate()?;
    let exec = LocalExecutor::new(req.gpus.clone(), req.measure.tracer.clone())?;
    let report = tune_with(req, &exec, progress)?;
    record(req, &report, progress);
    Ok(report)
}

/// The sweep through any executor.
pub fn tune_with(
    req: &TuneRequest,
    exec: &dyn Executor,
    progress: &dyn Progress,
) -> Result<TuneReport> {
    req.validate()?;
    let started = Instant::now();
    let gpus = exec.gpus();
    if gpus.len() > 1 && req.measure.check.is_some() && !req.template.contains(CHECK_PLACEHOLDER) {
        return Err(Error::Usage(format!(
            "--check with {} GPUs: write the output to {CHECK_PLACEHOLDER} in the template (each worker gets its own file)",
            gpus.len()
        )));
    }
    let (points, excluded) = req.space.points(MAX_POINTS)?;
    let baseline = match &req.baseline {
        Some(b) => b.clone(),
        None => points.first().cloned().ok_or_else(|| {
            Error::Usage(format!(
                "no point of the space satisfies the constraints ({excluded} excluded)"
            ))
        })?,
    };
    let n_points = points.len();
    let strategy = req.chosen_strategy(n_points);
    let mut chosen: Vec<BTreeMap<String, String>> = match strategy {
        Strategy::Random => {
            let n = req.trials.unwrap_or(points.len()).min(points.len());
            let mut rng = SplitMix(req.measure.seed);
            let mut idx: Vec<usize> = (0..points.len()).collect();
            for i in 0..n {
                let j = i + (rng.next() % (idx.len() - i) as u64) as usize;
                idx.swap(i, j);
            }
            let mut pick: Vec<usize> = idx[..n].to_vec();
            pick.sort_unstable();
            pick.into_iter().map(|i| points[i].clone()).collect()
        }
        _ => points,
    };
    // The baseline first, always measured.
    chosen.retain(|c| *c != baseline);
    chosen.insert(0, baseline.clone());
    let (device, driver) = exec.device();
    let key = TrialKey {
        template: req.template.clone(),
        params: String::new(),
        key: req.key.clone().unwrap_or_default(),
        device: device.clone().unwrap_or_else(|| "none".into()),
        driver: driver.clone().unwrap_or_default(),
        kopt_version: env!("CARGO_PKG_VERSION").into(),
        settings: req.settings(&baseline),
    };
    let cache = match crate::record::refuse_planted_link(&req.db)
        .and_then(|()| TuneCache::open(&req.db).map_err(Into::into))
    {
        Ok(c) => Some(c),
        Err(e) => {
            progress.note(&format!("warning: no tune cache, trials are not kept: {e}"));
            None
        }
    };
    let trials = chosen
        .into_iter()
        .map(|config| Trial {
            label: req.space.label(&config),
            command: req.space.substitute(&req.template, &config),
            config,
            samples: Vec::new(),
            spent_s: 0.0,
            status: TrialStatus::Ok,
            reason: None,
            correct: None,
            complete: false,
            measured: 0,
            ran: false,
            gpu: None,
            round: 0,
            output: None,
            source: None,
        })
        .collect();
    let mut d = Driver {
        req,
        exec,
        progress,
        cache,
        key,
        trials,
        timing: TimingSpec {
            choice: choice_name(req.measure.timing).into(),
            source: None,
            range: req.measure.range.clone(),
            tracer: req.measure.tracer.clone(),
        },
        device_seen: None,
        reference: None,
        notes: Vec::new(),
        done: 0,
    };
    if !req.fresh {
        d.load_cache();
    }
    progress.note(&format!(
        "tune: {} configs to try ({n_points} in the space, {excluded} excluded by constraints), strategy {}, {} worker(s)",
        d.trials.len(),
        strategy.as_str(),
        gpus.len().max(1)
    ));
    let result = d.sweep(strategy);
    for t in &d.trials {
        if let Some(o) = &t.output {
            let _ = std::fs::remove_file(o);
        }
    }
    result?;
    let (mut final_comparison, mut final_cached) = d.final_comparison()?;
    // A cached trial the final comparison re-timed far from its cached
    // median (a row planted within the sample bound, a stale cache) is
    // replaced by that timing and the configs are ranked again; the next
    // final comparison holds the configs that are really the best. Twice
    // at most: each pass re-times only what it chose.
    for _ in 0..2 {
        let contradicted = match (&final_comparison, final_cached) {
            (Some(f), false) => d.recheck_cached(f),
            _ => false,
        };
        if !contradicted {
            break;
        }
        (final_comparison, final_cached) = d.final_comparison()?;
    }
    Ok(d.report(
        strategy,
        excluded,
        gpus,
        device,
        driver,
        final_comparison,
        final_cached,
        started.elapsed().as_secs_f64(),
    ))
}
