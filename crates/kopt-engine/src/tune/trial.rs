//! A worker's side of the sweep: one trial job run and timed (its output
//! kept for the check), and the final interleaved comparison of the best.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kopt_bench::StopRule;
use kopt_model::BenchReport;

use crate::bench::{run_bench, BenchRequest, Run, Sampler, Timing, TimingChoice, VariantSpec};
use crate::error::{Error, Result};

use super::gpu::on_gpu;
use super::jobs::{parse_choice, source_name, FinalJob, TrialJob, TrialOutcome};
use super::request::CHECK_PLACEHOLDER;

/// The worker's file for `{CHECK}`: the check file's name in the worker's folder.
pub(super) fn check_path(dir: &Path, check: &Path) -> PathBuf {
    dir.join(check.file_name().unwrap_or(std::ffi::OsStr::new("out.npy")))
}

/// Measure one job with `sampler`; never fails: a failure is in the outcome.
pub fn run_trial_job(
    job: &TrialJob,
    sampler: &mut dyn Sampler,
    gpu: Option<&str>,
    scratch: &Path,
) -> TrialOutcome {
    let mut out = TrialOutcome {
        index: job.index,
        samples: Vec::new(),
        spent_s: 0.0,
        used_s: 0.0,
        failure: None,
        output: None,
        source: None,
        range: None,
        device: None,
        gpu: gpu.map(str::to_string),
    };
    if let Err(e) = measure(job, sampler, gpu, scratch, &mut out) {
        out.failure = Some(e.to_string());
    }
    out
}

pub(super) fn measure(
    job: &TrialJob,
    sampler: &mut dyn Sampler,
    gpu: Option<&str>,
    scratch: &Path,
    out: &mut TrialOutcome,
) -> Result<()> {
    let check_file = match &job.check {
        Some(c) if job.command.contains(CHECK_PLACEHOLDER) => {
            std::fs::create_dir_all(scratch)
                .map_err(|e| crate::error::io_error(scratch, "create", e))?;
            Some(check_path(scratch, c))
        }
        Some(c) => Some(c.clone()),
        None => None,
    };
    let placeholder = check_file
        .clone()
        .unwrap_or_else(|| scratch.join("check.npy"));
    let command = on_gpu(
        gpu,
        &job.command.replace(
            CHECK_PLACEHOLDER,
            &shell_quote(&placeholder.display().to_string()),
        ),
    );
    let timing = match job.timing.timing()? {
        Some(t) => t,
        None => {
            let t = sampler.choose(
                parse_choice(&job.timing.choice)?,
                job.timing.range.as_deref(),
                &command,
            )?;
            out.source = Some(source_name(t.source).to_string());
            out.range = t.range.clone();
            out.device = t.device.clone();
            t
        }
    };
    let rule: StopRule = job.stop.into();
    let budget = |used: f64| crate::profile::secs(rule.max_time_s - used);
    let mut used = job.have_spent_s;
    for _ in 0..job.warmup {
        let run = sampler.run(&command, &timing, Some(budget(used)))?;
        used += run.wall_s;
        out.used_s += run.wall_s;
        if run.cut {
            return Err(Error::WorkloadFailed(format!(
                "timed out: its warm-up run passed --max-time ({} s)",
                rule.max_time_s
            )));
        }
    }
    if let (Some(file), Some(_)) = (&check_file, &job.check) {
        if job.warmup > 0 {
            if !file.exists() {
                return Err(Error::WorkloadFailed(format!(
                    "it wrote no {} for --check",
                    file.display()
                )));
            }
            // Keep this trial's output under its own name: the next run overwrites the file.
            std::fs::create_dir_all(scratch)
                .map_err(|e| crate::error::io_error(scratch, "create", e))?;
            let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("npy");
            let kept = scratch.join(format!("trial-{}.{ext}", job.index));
            std::fs::rename(file, &kept)
                .or_else(|_| std::fs::copy(file, &kept).map(|_| ()))
                .map_err(|e| crate::error::io_error(&kept, "keep the check output in", e))?;
            out.output = Some(kept);
        }
    }
    let mut samples = job.have.clone();
    let mut spent = job.have_spent_s;
    let mut empty_runs = 0;
    let enough = |s: &[f64], spent: f64| match job.samples {
        Some(n) => s.len() >= n || spent >= rule.max_time_s,
        None => rule.should_stop(s, spent),
    };
    while !enough(&samples, spent) {
        let run: Run = sampler.run(&command, &timing, Some(budget(used)))?;
        if let Some(bad) = run
            .samples
            .iter()
            .find(|s| !kopt_bench::sample_s_in_bounds(**s))
        {
            return Err(Error::WorkloadFailed(format!(
                "a sample of {} s: samples must be positive, finite and {}",
                kopt_model::figure::as_read(*bad),
                kopt_bench::sample_bounds_text()
            )));
        }
        spent += run.wall_s;
        used += run.wall_s;
        out.spent_s += run.wall_s;
        out.used_s += run.wall_s;
        let got = run.samples.len();
        samples.extend(&run.samples);
        out.samples.extend(run.samples);
        if run.cut || samples.len() >= crate::bench::MAX_SAMPLES {
            break;
        }
        empty_runs = if got == 0 { empty_runs + 1 } else { 0 };
        if empty_runs >= 100 {
            return Err(Error::WorkloadFailed(
                "100 runs in a row gave no sample".into(),
            ));
        }
    }
    if samples.is_empty() {
        return Err(Error::WorkloadFailed(format!(
            "timed out: no sample within --max-time ({} s)",
            rule.max_time_s
        )));
    }
    Ok(())
}

pub(super) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A sampler whose timing is already decided.
pub(super) struct Fixed<'a> {
    inner: &'a mut dyn Sampler,
    timing: Option<Timing>,
}

impl Sampler for Fixed<'_> {
    fn choose(&mut self, choice: TimingChoice, range: Option<&str>, first: &str) -> Result<Timing> {
        match &self.timing {
            Some(t) => Ok(t.clone()),
            None => self.inner.choose(choice, range, first),
        }
    }

    fn run(&mut self, command: &str, timing: &Timing, budget: Option<Duration>) -> Result<Run> {
        self.inner.run(command, timing, budget)
    }
}

/// The final comparison with `sampler` on `gpu`: the bench loop, interleaved.
pub fn run_final_job(
    job: &FinalJob,
    sampler: &mut dyn Sampler,
    gpu: Option<&str>,
    scratch: &Path,
) -> Result<BenchReport> {
    std::fs::create_dir_all(scratch).map_err(|e| crate::error::io_error(scratch, "create", e))?;
    let sink = shell_quote(&scratch.join("check.npy").display().to_string());
    let mut req = BenchRequest::new(
        job.variants
            .iter()
            .map(|(name, command)| VariantSpec {
                name: name.clone(),
                command: on_gpu(gpu, &command.replace(CHECK_PLACEHOLDER, &sink)),
            })
            .collect(),
    );
    req.measure.threshold = job.threshold;
    req.measure.noise = job.noise;
    req.measure.warmup = job.warmup;
    req.measure.stop = job.stop.into();
    req.measure.seed = job.seed;
    req.measure.timing = parse_choice(&job.timing.choice)?;
    req.measure.range = job.timing.range.clone();
    req.measure.tracer = job.timing.tracer.clone();
    let mut fixed = Fixed {
        timing: job.timing.timing()?,
        inner: sampler,
    };
    let mut r = run_bench(&req, &mut fixed, &crate::Silent)?;
    for (v, (_, command)) in r.variants.iter_mut().zip(&job.variants) {
        v.command = command.clone();
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("/tmp/a.npy"), "/tmp/a.npy");
        assert_eq!(shell_quote("/tmp/a b'c"), "'/tmp/a b'\\''c'");
    }
}
