//! The sweep's bookkeeping: jobs made from trials, outcomes folded back,
//! outputs checked against the baseline's, the final comparison and the report.

use std::collections::BTreeMap;

use kopt_bench::relative_noise;
use kopt_model::tune::{TrialResult, TrialStatus, TuneParam, TuneReport, TuneWinner};
use kopt_model::BenchReport;

use crate::error::{Error, Result};

use super::jobs::{parse_source, FinalJob, TrialJob, TrialOutcome};
use super::request::{canonical, Strategy};
use super::state::Driver;

impl Driver<'_> {
    /// The job that brings trial `i` to `samples` (None: the stopping rule).
    pub(super) fn job(&self, i: usize, samples: Option<usize>) -> TrialJob {
        let t = &self.trials[i];
        let first = t.samples.is_empty();
        let check = self.req.measure.check.is_some() && first;
        TrialJob {
            index: i,
            command: t.command.clone(),
            warmup: if first {
                self.req.measure.warmup.max(u32::from(check))
            } else {
                0
            },
            check: if check {
                self.req.measure.check.clone()
            } else {
                None
            },
            samples,
            stop: self.req.measure.stop.into(),
            have: t.samples.clone(),
            have_spent_s: t.spent_s,
            timing: self.timing.clone(),
        }
    }

    pub(super) fn needs(&self, i: usize, samples: Option<usize>) -> bool {
        let t = &self.trials[i];
        if t.status != TrialStatus::Ok || t.complete {
            return false;
        }
        match samples {
            Some(n) => t.samples.len() < n,
            None => true,
        }
    }

    /// Run `jobs`, folding each outcome in as it arrives (and committing it).
    pub(super) fn run(&mut self, jobs: Vec<TrialJob>, round: usize) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let total = self.trials.len();
        let targets: BTreeMap<usize, Option<usize>> =
            jobs.iter().map(|j| (j.index, j.samples)).collect();
        let exec = self.exec;
        let mut err = None;
        exec.run_trials(jobs, &mut |o| {
            let i = o.index;
            let target = targets.get(&i).copied().flatten();
            if let Err(e) = self.fold(o, target, round) {
                err.get_or_insert(e);
            }
            self.done += 1;
            let t = &self.trials[i];
            let what = match t.status {
                TrialStatus::Ok => t
                    .median()
                    .map_or("-".into(), |m| kopt_model::format_duration_ns(m * 1e9)),
                s => format!("{s}: {}", t.reason.as_deref().unwrap_or("")),
            };
            self.progress.note(&format!(
                "trial {}/{total} {} {what} ({} samples{})",
                i + 1,
                t.label,
                t.samples.len(),
                t.gpu
                    .as_deref()
                    .map_or(String::new(), |g| format!(", GPU {g}"))
            ));
        })?;
        err.map_or(Ok(()), Err)
    }

    pub(super) fn fold(
        &mut self,
        o: TrialOutcome,
        target: Option<usize>,
        round: usize,
    ) -> Result<()> {
        let i = o.index;
        if let Some(s) = &o.source {
            if self.timing.source.is_none() {
                self.timing.source = Some(s.clone());
                self.timing.range = o.range.clone().or(self.timing.range.clone());
            }
        }
        if o.device.is_some() {
            self.device_seen = o.device.clone();
        }
        let rule = self.req.measure.stop;
        if let Some(out) = &o.output {
            if i == 0 {
                let r = kopt_ingest::tensor::read_tensors(out).map_err(|e| {
                    Error::WorkloadFailed(format!(
                        "the baseline config {}: its --check output: {e}",
                        self.trials[0].label
                    ))
                })?;
                self.reference = Some(r);
                let _ = std::fs::remove_file(out);
            }
        }
        let t = &mut self.trials[i];
        t.ran = true;
        t.round = round;
        t.gpu = o.gpu.clone().or(t.gpu.take());
        t.source = self.timing.source.clone();
        // A trial's output waits for the baseline's when that is not in yet.
        t.output = o.output.clone().filter(|_| i != 0);
        if let Some(f) = o.failure {
            t.status = TrialStatus::Failed;
            t.reason = Some(f);
            t.complete = true;
            t.measured += o.samples.len();
            t.samples.extend(o.samples);
        } else {
            t.measured += o.samples.len();
            t.samples.extend(o.samples);
            t.spent_s += o.spent_s;
            t.complete = t.complete
                || match target {
                    None => true,
                    Some(_) => {
                        rule.should_stop(&t.samples, t.spent_s) || t.spent_s >= rule.max_time_s
                    }
                };
        }
        if self.trials[i].output.is_none() {
            self.save(i);
        }
        self.gate_pending();
        Ok(())
    }

    /// Compare every trial's kept output with the baseline's, once that is
    /// in; a trial is committed to the cache only after its gate.
    pub(super) fn gate_pending(&mut self) {
        let Some(reference) = &self.reference else {
            return;
        };
        let mut gated = Vec::new();
        for (i, t) in self.trials.iter_mut().enumerate().skip(1) {
            let Some(path) = t.output.take() else {
                continue;
            };
            let (passed, problems) = match kopt_ingest::tensor::read_tensors(&path) {
                Ok(c) => {
                    let rep =
                        kopt_bench::compare_tensors(reference, &c, self.req.measure.tol, false);
                    let mut problems = rep.problems.clone();
                    for x in &rep.tensors {
                        problems.extend(x.problems.iter().map(|p| format!("{}: {p}", x.name)));
                    }
                    (rep.passed, problems)
                }
                Err(e) => (false, vec![format!("its output cannot be read: {e}")]),
            };
            let _ = std::fs::remove_file(&path);
            t.correct = Some(passed);
            if !passed && t.status == TrialStatus::Ok {
                t.status = TrialStatus::Rejected;
                t.complete = true;
                t.reason = Some(format!(
                    "output differs from the baseline config's: {}",
                    kopt_model::clip_chars(&problems.join("; "), 300)
                ));
            }
            gated.push(i);
        }
        for i in gated {
            self.save(i);
        }
    }

    pub(super) fn baseline_failed(&self) -> Result<()> {
        let b = &self.trials[0];
        if b.status == TrialStatus::Failed {
            return Err(Error::WorkloadFailed(format!(
                "the baseline config {} failed: {} (choose another with --baseline)",
                b.label,
                b.reason.as_deref().unwrap_or("")
            )));
        }
        Ok(())
    }

    /// Baseline and the `top` best configs, interleaved on one GPU (cached).
    pub(super) fn final_comparison(&mut self) -> Result<(Option<BenchReport>, bool)> {
        let ranked = self.ranked();
        let mut chosen: Vec<usize> = vec![0];
        chosen.extend(
            ranked
                .iter()
                .copied()
                .filter(|&i| i != 0)
                .take(self.req.top),
        );
        let baseline_ok = matches!(self.trials[0].status, TrialStatus::Ok | TrialStatus::Pruned);
        if chosen.len() < 2 || !baseline_ok || self.trials[0].samples.is_empty() {
            return Ok((None, false));
        }
        let candidates = serde_json::to_string(
            &chosen
                .iter()
                .map(|&i| canonical(&self.trials[i].config))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        if !self.req.fresh {
            if let Some(cache) = &self.cache {
                if let Ok(Some(json)) = cache.get_final(&self.key, &candidates) {
                    let labels: Vec<&str> = chosen
                        .iter()
                        .map(|&i| self.trials[i].label.as_str())
                        .collect();
                    match trusted_final(&json, &labels, &self.req.measure) {
                        Ok(r) => return Ok((Some(r), true)),
                        Err(why) => self.notes.push(format!(
                            "the tune cache's final comparison was ignored and measured again: {why}"
                        )),
                    }
                }
            }
        }
        let job = FinalJob {
            variants: chosen
                .iter()
                .map(|&i| (self.trials[i].label.clone(), self.trials[i].command.clone()))
                .collect(),
            // Every candidate that ran in this sweep is warm (JIT and disk caches).
            warmup: if chosen.iter().all(|&i| self.trials[i].ran) {
                0
            } else {
                self.req.measure.warmup
            },
            stop: self.req.measure.stop.into(),
            threshold: self.req.measure.threshold,
            noise: self.req.measure.noise,
            seed: self.req.measure.seed,
            timing: self.timing.clone(),
        };
        self.progress.note(&format!(
            "final comparison: {} timed interleaved on one GPU",
            job.variants
                .iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        match self.exec.run_final(&job) {
            Ok(r) => {
                if let (Some(cache), Ok(json)) = (self.cache.as_mut(), serde_json::to_string(&r)) {
                    let now = crate::run_folder::utc_timestamp(std::time::SystemTime::now());
                    if let Err(e) = cache.put_final(&self.key, &candidates, &json, &now) {
                        self.progress
                            .note(&format!("warning: final comparison not cached: {e}"));
                    }
                }
                Ok((Some(r), false))
            }
            Err(e) => {
                self.notes.push(format!(
                    "the final comparison failed ({e}): the winner is the best trial median"
                ));
                Ok((None, false))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn report(
        &self,
        strategy: Strategy,
        excluded: usize,
        gpus: Vec<String>,
        device: Option<String>,
        driver: Option<String>,
        final_comparison: Option<BenchReport>,
        final_cached: bool,
        wall_s: f64,
    ) -> TuneReport {
        let base_median = self.trials[0].median();
        let trials: Vec<TrialResult> = self
            .trials
            .iter()
            .map(|t| {
                let m = t.median();
                TrialResult {
                    label: t.label.clone(),
                    config: t.config.clone(),
                    command: t.command.clone(),
                    status: t.status,
                    reason: t.reason.clone(),
                    values_s: t.samples.clone(),
                    median_s: m,
                    relative_noise: relative_noise(&t.samples),
                    speedup_vs_baseline: match (base_median, m) {
                        (Some(b), Some(m)) if t.status != TrialStatus::Failed => Some(b / m),
                        _ => None,
                    },
                    correct: t.correct,
                    cached: !t.ran,
                    measured_samples: t.measured,
                    gpu: t.gpu.clone(),
                    round: t.round,
                }
            })
            .collect();
        let winner = match &final_comparison {
            Some(f) => f
                .variants
                .iter()
                .min_by(|a, b| a.median_s.total_cmp(&b.median_s))
                .and_then(|v| {
                    let t = self.trials.iter().find(|t| t.label == v.name)?;
                    Some(TuneWinner {
                        label: t.label.clone(),
                        config: t.config.clone(),
                        command: t.command.clone(),
                        median_s: v.median_s,
                        speedup_vs_baseline: v.speedup_vs_first,
                        ratio_interval: v.ratio_interval,
                        verdict: v.verdict.clone(),
                    })
                }),
            None => self.ranked().first().map(|&i| {
                let t = &self.trials[i];
                let m = t.median().unwrap_or(f64::NAN);
                TuneWinner {
                    label: t.label.clone(),
                    config: t.config.clone(),
                    command: t.command.clone(),
                    median_s: m,
                    speedup_vs_baseline: base_median.map_or(f64::NAN, |b| b / m),
                    ratio_interval: None,
                    verdict: None,
                }
            }),
        };
        let source = self
            .timing
            .source
            .as_deref()
            .and_then(parse_source)
            .map_or("-".into(), |s| s.describe(self.timing.range.as_deref()));
        TuneReport {
            schema: kopt_model::SCHEMA.into(),
            template: self.req.template.clone(),
            key: self.req.key.clone(),
            device: device.or(self.device_seen.clone()),
            driver,
            kopt_version: env!("CARGO_PKG_VERSION").into(),
            strategy: strategy.as_str().into(),
            params: self
                .req
                .space
                .params
                .iter()
                .map(|p| TuneParam {
                    name: p.name.clone(),
                    values: p.values.clone(),
                })
                .collect(),
            constraints: self
                .req
                .space
                .constraints
                .iter()
                .map(|c| c.text.clone())
                .collect(),
            space_size: self.req.space.size_unfiltered().saturating_sub(excluded),
            excluded,
            gpus,
            source,
            baseline: self.trials[0].label.clone(),
            measured_trials: trials.iter().filter(|t| !t.cached).count(),
            cached_trials: trials.iter().filter(|t| t.cached).count(),
            trial_samples: trials.iter().map(|t| t.values_s.len()).sum(),
            measured_samples: trials.iter().map(|t| t.measured_samples).sum(),
            final_samples: final_comparison
                .as_ref()
                .map_or(0, |f| f.variants.iter().map(|v| v.samples).sum()),
            final_cached,
            trials,
            final_comparison,
            winner,
            wall_s,
            notes: self.notes.clone(),
        }
    }
}

/// A cached final comparison only as far as it can be checked: its
/// variants are the ones chosen, in order, each with samples a measured run
/// could have (kopt_bench's bound, at most MAX_SAMPLES), and its medians,
/// intervals and verdicts are decided again from those samples with this
/// sweep's settings, never read from the row (the history database travels
/// with a repository). Otherwise why not.
fn trusted_final(
    json: &str,
    labels: &[&str],
    measure: &crate::bench::Measurement,
) -> std::result::Result<BenchReport, String> {
    let r: BenchReport =
        serde_json::from_str(json).map_err(|e| format!("it cannot be read ({e})"))?;
    let names: Vec<&str> = r.variants.iter().map(|v| v.name.as_str()).collect();
    if names != labels {
        return Err(format!(
            "it compares {} variant(s), not the {} chosen",
            names.len(),
            labels.len()
        ));
    }
    let mut measured = Vec::new();
    for v in &r.variants {
        if v.values_s.is_empty() || v.values_s.len() > crate::bench::MAX_SAMPLES {
            return Err(format!(
                "{} holds {} samples (1 to {} are kept)",
                v.name,
                v.values_s.len(),
                crate::bench::MAX_SAMPLES
            ));
        }
        if let Some(bad) = v
            .values_s
            .iter()
            .find(|s| !kopt_bench::sample_s_in_bounds(**s))
        {
            return Err(format!(
                "{} has a sample of {} s: a sample must be {}",
                v.name,
                kopt_model::figure::as_read(*bad),
                kopt_bench::sample_bounds_text()
            ));
        }
        measured.push(crate::bench::Measured {
            name: v.name.clone(),
            command: v.command.clone(),
            samples: v.values_s.clone(),
            correct: v.correct,
            check_problems: v.check_problems.clone(),
        });
    }
    let source = r
        .variants
        .first()
        .map(|v| v.source.clone())
        .unwrap_or_default();
    let decision = crate::bench::Decision {
        threshold: measure.threshold,
        noise: measure.noise,
        seed: measure.seed,
    };
    let mut decided = crate::bench::decide_all(&measured, &decision, &source, r.device.clone());
    decided.notes = r.notes;
    Ok(decided)
}
