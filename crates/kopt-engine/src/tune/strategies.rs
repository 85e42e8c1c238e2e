//! The strategies: grid and random (every chosen config measured once)
//! and successive halving (the bootstrap interval decides who survives),
//! with the seeded generator the random pick uses.

use kopt_bench::bootstrap_median_ratio;
use kopt_model::tune::TrialStatus;

use crate::bench::TimingChoice;
use crate::error::{Error, Result};

use super::jobs::TrialJob;
use super::request::Strategy;
use super::state::Driver;

impl Driver<'_> {
    pub(super) fn sweep(&mut self, strategy: Strategy) -> Result<()> {
        let check = self.req.measure.check.is_some();
        let first_target = match strategy {
            Strategy::Halving => Some(self.req.halving_start),
            _ => None,
        };
        let others_need = (1..self.trials.len()).any(|i| self.needs(i, first_target));
        let baseline_needs = self.needs(0, first_target);
        // The baseline gives the reference output every other trial is
        // compared with; measured before, it runs once more for that only.
        let reference_job = (!baseline_needs && check && others_need).then(|| {
            let mut job = self.job(0, first_target);
            job.samples = Some(self.trials[0].samples.len());
            job.warmup = self.req.measure.warmup.max(1);
            job.check = self.req.measure.check.clone();
            job
        });
        // When the timing source must be probed (auto, gpu), the baseline
        // runs alone first and resolves it; otherwise it runs beside the others.
        let probe = matches!(
            self.req.measure.timing,
            TimingChoice::Auto | TimingChoice::Gpu
        ) && self.timing.source.is_none();
        let mut first_batch = Vec::new();
        if probe && (baseline_needs || others_need) {
            let job = reference_job.unwrap_or_else(|| self.job(0, first_target));
            self.run(vec![job], 0)?;
            self.baseline_failed()?;
        } else if let Some(job) = reference_job {
            first_batch.push(job);
        }
        self.baseline_failed()?;
        match strategy {
            Strategy::Grid | Strategy::Random => {
                first_batch.extend(
                    (0..self.trials.len())
                        .filter(|&i| self.needs(i, None))
                        .map(|i| self.job(i, None)),
                );
                self.run(first_batch, 0)?;
                self.after_first_batch()
            }
            Strategy::Halving => self.halving(first_batch),
        }
    }

    pub(super) fn after_first_batch(&self) -> Result<()> {
        self.baseline_failed()?;
        let pending = self.trials.iter().any(|t| t.output.is_some());
        if self.req.measure.check.is_some() && self.reference.is_none() && pending {
            return Err(Error::WorkloadFailed(format!(
                "the baseline config {} gave no --check output to compare with",
                self.trials[0].label
            )));
        }
        Ok(())
    }

    /// Successive halving: every config gets `halving_start` samples; after
    /// each round the slower half goes, except configs whose interval
    /// against the leader cannot tell them apart yet; survivors get twice
    /// the samples, until `top` remain.
    pub(super) fn halving(&mut self, first_batch: Vec<TrialJob>) -> Result<()> {
        let mut alive: Vec<usize> = (0..self.trials.len()).collect();
        let mut target = self.req.halving_start;
        let mut extra = first_batch;
        for round in 0..64 {
            let mut jobs = std::mem::take(&mut extra);
            jobs.extend(
                alive
                    .iter()
                    .copied()
                    .filter(|&i| self.needs(i, Some(target)))
                    .map(|i| self.job(i, Some(target))),
            );
            self.run(jobs, round)?;
            self.after_first_batch()?;
            alive.retain(|&i| self.trials[i].usable());
            for &i in &alive {
                self.trials[i].round = round;
            }
            if alive.len() <= self.req.top {
                break;
            }
            alive.sort_by(|&a, &b| {
                let (ma, mb) = (self.trials[a].median(), self.trials[b].median());
                ma.unwrap_or(f64::MAX).total_cmp(&mb.unwrap_or(f64::MAX))
            });
            let keep = alive.len().div_ceil(2).max(self.req.top);
            let leader = self.trials[alive[0]].samples.clone();
            let mut next = alive[..keep].to_vec();
            for &i in &alive[keep..] {
                let t = &self.trials[i];
                let iv =
                    bootstrap_median_ratio(&leader, &t.samples, 1000, 0.95, self.req.measure.seed);
                let clearly_slower = iv.is_some_and(|iv| iv.low > 1.0 + self.req.measure.noise);
                if clearly_slower || t.complete {
                    let reason = match iv {
                        Some(iv) => format!(
                            "dropped in halving round {round}: {:.2}x the leader's median (interval {:.2} to {:.2}) after {} samples",
                            iv.estimate,
                            iv.low,
                            iv.high,
                            t.samples.len()
                        ),
                        None => format!("dropped in halving round {round}"),
                    };
                    let t = &mut self.trials[i];
                    t.status = TrialStatus::Pruned;
                    t.reason = Some(reason);
                } else {
                    next.push(i);
                }
            }
            alive = next;
            target = target.saturating_mul(2);
        }
        Ok(())
    }

    pub(super) fn ranked(&self) -> Vec<usize> {
        let mut ok: Vec<usize> = (0..self.trials.len())
            .filter(|&i| self.trials[i].usable())
            .collect();
        ok.sort_by(|&a, &b| {
            self.trials[a]
                .median()
                .unwrap_or(f64::MAX)
                .total_cmp(&self.trials[b].median().unwrap_or(f64::MAX))
        });
        ok
    }
}

/// A small seeded generator (splitmix64) for the random strategy.
pub(super) struct SplitMix(pub(super) u64);

impl SplitMix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_moves_on() {
        let mut r = SplitMix(1);
        let (a, b) = (r.next(), r.next());
        assert_ne!(a, b);
    }
}
