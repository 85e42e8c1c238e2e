//! Step periods of a bare run (no recorder), matched to the traced steps
//! by step ranges, synchronising calls or launch counts.

use kopt_model::Timeline;

use super::stats::median;
use super::steady::{Steady, WARMUP_FACTOR};
use super::steps::Steps;
use super::syncs::host_sync_ends;

/// Step periods (one start to the next) of the bare run, when it timed the
/// range family the traced steps came from: the first `warmup_steps` (at
/// least one: module loading, first calls) left out as in the traced run.
/// None with fewer than three periods left.
pub(super) fn bare_step_periods(
    t: &Timeline,
    family: Option<&str>,
    warmup_steps: usize,
) -> Option<Vec<f64>> {
    let bare = t.bare_steps.as_ref()?;
    if family? != kopt_model::range_family(&bare.range) {
        return None;
    }
    // Steps of one loop follow each other: overlapping ranges are not one
    // program's steps (the spans are sorted by start when read).
    if bare.spans_ns.windows(2).any(|w| w[1].0 < w[0].1) {
        return None;
    }
    let periods: Vec<f64> = bare
        .periods_ns(warmup_steps.max(1))
        .into_iter()
        .filter(|p| *p > 0.0)
        .collect();
    (periods.len() >= 3).then_some(periods)
}

/// Step periods of a sync-only bare run (range `BARE_SYNC_RANGE`) for
/// steps without ranges: the traced run's steady step boundaries are
/// matched to the synchronising calls that ended before each (the k-th
/// traced call is the k-th bare one, counted from the end, where start-up
/// may differ), and the bare periods read between those calls' ends. None
/// where a step holds no sync call, the calls do not line up, or fewer
/// than three periods are left; also where the bare steps come out more
/// than 10% slower than the traced ones (a bare run cannot be: the two
/// runs' calls did not match).
pub(super) fn bare_sync_periods(t: &Timeline, steps: &Steps, steady: &Steady) -> Option<Vec<f64>> {
    let bare = t.bare_steps.as_ref()?;
    if bare.range != kopt_model::BARE_SYNC_RANGE || steps.family.is_some() {
        return None;
    }
    let traced = host_sync_ends(t);
    let mut bare_ends: Vec<i64> = bare.spans_ns.iter().map(|s| s.1).collect();
    bare_ends.sort_unstable();
    let bounds: Vec<i64> = (steady.first..=steady.last + 1)
        .filter_map(|i| steps.starts.get(i).copied())
        .collect();
    let counts: Vec<usize> = bounds
        .iter()
        .map(|b| traced.partition_point(|e| e <= b))
        .collect();
    if counts.first().is_none_or(|k| *k == 0) || counts.windows(2).any(|w| w[1] <= w[0]) {
        return None;
    }
    let shift = bare_ends.len() as i64 - traced.len() as i64;
    let times: Vec<i64> = counts
        .iter()
        .map(|&k| {
            let i = k as i64 - 1 + shift;
            usize::try_from(i)
                .ok()
                .and_then(|i| bare_ends.get(i).copied())
        })
        .collect::<Option<_>>()?;
    let periods: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    if periods.len() < 3 || periods.iter().any(|p| *p <= 0.0) {
        return None;
    }
    let traced_mean = (bounds[bounds.len() - 1] - bounds[0]) as f64 / (bounds.len() - 1) as f64;
    no_slower_than_traced(periods, traced_mean)
}

/// A bare run's step periods, kept only when their mean is at most 10%
/// above the traced step's: a bare step cannot be slower, so a slower one
/// means the two runs' marks did not line up.
pub(super) fn no_slower_than_traced(periods: Vec<f64>, traced_mean: f64) -> Option<Vec<f64>> {
    let bare_mean = periods.iter().sum::<f64>() / periods.len() as f64;
    (bare_mean <= 1.1 * traced_mean).then_some(periods)
}

/// Step periods of a launch-count bare run (a launch range: every N-th
/// launch call timed, N the traced step's launch count) for steps without
/// ranges: the traced run's steady steps span launch ordinals
/// `[first, end)` (its launch calls counted as the tracer counts them); the
/// bare marks inside that span, consecutive ones `N` launches apart, are one
/// step apart whatever the phase, and their time differences, scaled to the
/// traced step's mean launch count, are the untraced periods (those past
/// `WARMUP_FACTOR` times their median left out). None under three periods,
/// and where the bare steps come out more than 10% slower
/// than the traced ones (the two runs' launches did not line up).
pub(super) fn bare_launch_periods(
    t: &Timeline,
    steps: &Steps,
    steady: &Steady,
) -> Option<Vec<f64>> {
    let bare = t.bare_steps.as_ref()?;
    kopt_model::bare_launch_every(&bare.range)?;
    if steps.family.is_some() {
        return None;
    }
    let launches = crate::host_syncs::sorted_launch_starts(t);
    let from = *steps.starts.get(steady.first)?;
    let until = steps
        .starts
        .get(steady.last + 1)
        .copied()
        .unwrap_or_else(|| steps.until(steady.last).saturating_add(1));
    let first = launches.partition_point(|s| *s < from) as i64;
    let end = launches.partition_point(|s| *s < until) as i64;
    let n_steps = (steady.last + 1 - steady.first) as f64;
    if end <= first || n_steps < 1.0 {
        return None;
    }
    let per_step = (end - first) as f64 / n_steps;
    let mut marks: Vec<(i64, i64)> = bare
        .spans_ns
        .iter()
        .map(|&(time, ordinal)| (ordinal, time))
        .filter(|&(ordinal, _)| ordinal >= first && ordinal <= end)
        .collect();
    marks.sort_unstable();
    let periods: Vec<f64> = marks
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) as f64 * per_step / (w[1].0 - w[0].0).max(1) as f64)
        .collect();
    if periods.iter().any(|p| *p <= 0.0) {
        return None;
    }
    // A pause of the bare run's own (its first call, a collection) is not
    // a step: periods past the warm-up factor of the median are left out.
    let mid = median(periods.clone())?;
    let periods: Vec<f64> = periods
        .into_iter()
        .filter(|p| *p <= WARMUP_FACTOR * mid)
        .collect();
    if periods.len() < 3 {
        return None;
    }
    no_slower_than_traced(periods, (until - from) as f64 / n_steps)
}

#[cfg(test)]
mod tests {
    use crate::timeline::summarize;
    use crate::timeline::synthetic::forward_passes;
    use kopt_model::ApiKind;

    /// The sync ends of a bare run of `forward_passes(warmup, steps, 6, 2,
    /// _)` (four syncs a step), `lead` extra calls at start-up, steps of
    /// `period_ns`.
    fn bare_syncs(
        warmup: usize,
        steps: usize,
        lead: usize,
        period_ns: i64,
    ) -> kopt_model::BareSteps {
        let mut ends: Vec<i64> = (0..lead as i64).map(|i| 10_000 + i).collect();
        for step in 0..(warmup + steps) as i64 {
            for k in 1..=4 {
                let e = 5_000_000 + step * period_ns + k * period_ns / 4;
                ends.push(e);
            }
        }
        kopt_model::BareSteps {
            range: kopt_model::BARE_SYNC_RANGE.into(),
            spans_ns: ends.into_iter().map(|e| (e, e)).collect(),
            in_process: false,
        }
    }

    #[test]
    fn a_program_without_ranges_is_timed_bare_by_its_sync_calls() {
        // 25 launches, 4 syncs and 50 us of host work a step: 187 us traced.
        for lead in [0, 3] {
            let mut t = forward_passes(2, 12, 6, 2, 50_000);
            t.recorder = kopt_model::Recorder::KoptTracer;
            t.bare_steps = Some(bare_syncs(2, 12, lead, 120_000));
            let g = summarize(&t).unwrap().graph_prediction.unwrap();
            assert!(g.eager_measured_bare, "lead {lead}: {}", g.speedup.model);
            assert!(
                (g.eager_corrected_per_step_ns - 120_000.0).abs() < 1.0,
                "lead {lead}: {}",
                g.eager_corrected_per_step_ns
            );
            assert!(
                (g.eager_per_step_ns - 187_000.0).abs() < 1_000.0,
                "{}",
                g.eager_per_step_ns
            );
            // The recorder's cost a launch is what the two runs differ by.
            assert!((g.recorder_ns_per_launch - 67_000.0 / 25.0).abs() < 50.0);
            assert!(
                g.speedup.model.contains("synchronising calls"),
                "{}",
                g.speedup.model
            );
        }
    }

    /// A launch-count bare run of `forward_passes(warmup, steps, 6, _, _)`
    /// (25 launches a step, one more in each warm-up step), every 25th
    /// launch call timed, steps of `period_ns`, `lead` extra launches at
    /// start-up.
    fn bare_launch_marks(
        warmup: usize,
        steps: usize,
        lead: i64,
        period_ns: i64,
    ) -> kopt_model::BareSteps {
        // Start-up and the first call (its algorithm trials) slow, then
        // launches at the step's pace.
        let per_step = 25i64;
        let warm = lead + per_step + 1;
        let total = lead + warmup as i64 * (per_step + 1) + steps as i64 * per_step;
        let time_of = |n: i64| {
            if n < warm {
                1_000_000 + n * 100_000
            } else {
                9_000_000 + (n - warm) * period_ns / per_step
            }
        };
        kopt_model::BareSteps {
            range: kopt_model::bare_launch_range(per_step as u64),
            spans_ns: (0..total)
                .step_by(per_step as usize)
                .map(|n| (time_of(n), n))
                .collect(),
            in_process: false,
        }
    }

    #[test]
    fn a_program_without_ranges_or_syncs_is_timed_bare_by_its_launch_count() {
        // No sync call at all: the steps come from the kernel sequence and
        // the host's pause between forward passes.
        for lead in [0, 7] {
            let mut t = forward_passes(2, 12, 6, 0, 50_000);
            t.api_calls.retain(|c| c.kind != ApiKind::Synchronize);
            t.recorder = kopt_model::Recorder::KoptTracer;
            let s = summarize(&t).unwrap();
            assert_eq!(s.sync_calls, 0);
            let traced = s.graph_prediction.unwrap();
            assert!(!traced.eager_measured_bare);
            t.bare_steps = Some(bare_launch_marks(2, 12, lead, 120_000));
            let g = summarize(&t).unwrap().graph_prediction.unwrap();
            assert!(g.eager_measured_bare, "lead {lead}: {}", g.speedup.model);
            assert!(
                (g.eager_corrected_per_step_ns - 120_000.0).abs() < 1.0,
                "lead {lead}: {}",
                g.eager_corrected_per_step_ns
            );
            assert!(
                g.speedup.model.contains("kernel launch calls"),
                "{}",
                g.speedup.model
            );
        }
        // Marks that come out slower than the traced steps did not line up
        // with them: the trace's own estimate stands.
        let mut t = forward_passes(2, 12, 6, 0, 50_000);
        t.api_calls.retain(|c| c.kind != ApiKind::Synchronize);
        t.recorder = kopt_model::Recorder::KoptTracer;
        t.bare_steps = Some(bare_launch_marks(2, 12, 0, 400_000));
        let g = summarize(&t).unwrap().graph_prediction.unwrap();
        assert!(!g.eager_measured_bare);
        // Nor does another program's range count.
        t.bare_steps = Some(kopt_model::BareSteps {
            range: "step".into(),
            spans_ns: vec![(0, 10), (20, 30), (40, 50), (60, 70), (80, 90)],
            in_process: false,
        });
        assert!(
            !summarize(&t)
                .unwrap()
                .graph_prediction
                .unwrap()
                .eager_measured_bare
        );
    }

    #[test]
    fn bare_sync_ends_that_do_not_match_the_steps_are_not_used() {
        let mut t = forward_passes(2, 12, 6, 2, 50_000);
        t.recorder = kopt_model::Recorder::KoptTracer;
        // Slower than traced: the two runs' calls do not line up.
        t.bare_steps = Some(bare_syncs(2, 12, 0, 400_000));
        let g = summarize(&t).unwrap().graph_prediction.unwrap();
        assert!(!g.eager_measured_bare);
        // Too few calls for the steps.
        t.bare_steps = Some(bare_syncs(0, 2, 0, 120_000));
        assert!(
            !summarize(&t)
                .unwrap()
                .graph_prediction
                .unwrap()
                .eager_measured_bare
        );
        // Another range's steps are not sync ends.
        let mut other = bare_syncs(2, 12, 0, 120_000);
        other.range = "step".into();
        t.bare_steps = Some(other);
        assert!(
            !summarize(&t)
                .unwrap()
                .graph_prediction
                .unwrap()
                .eager_measured_bare
        );
    }
}
