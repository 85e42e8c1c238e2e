//! The window a summary is taken over: the steady state's steps and
//! activities where steps were found, else the whole trace. Built once per
//! analysis: the summary and the warm-up phases both read it (finding the
//! steps is most of a long trace's analysis).

use kopt_model::{ApiKind, GpuActivity, Timeline};

use super::launches::{launch_spans, launched_at, CallSpans};
use super::steady::{phases_of, steady_activities, steady_steps, Phases, Steady};
use super::steps::{find_steps_with, Steps};

/// A (spliced) timeline's steps, steady state and the window over them.
pub struct Window<'a> {
    pub(super) t: &'a Timeline,
    /// Launch call spans by correlation id (`launch_spans`).
    pub(super) calls: CallSpans,
    pub(super) steps: Option<Steps>,
    pub(super) steady: Option<Steady>,
    /// The window's activities, by start time; never empty.
    pub(super) acts: Vec<&'a GpuActivity>,
    pub(super) start: i64,
    pub(super) end: i64,
    /// `end - start`, at least 1 ns.
    pub(super) wall: i64,
}

impl<'a> Window<'a> {
    /// The steady steps' host spans, each from its start to the next
    /// one's (the whole window as one step where no step was found).
    pub(super) fn step_windows(&self) -> Vec<(i64, i64)> {
        match (&self.steps, &self.steady) {
            (Some(s), Some(st)) => (st.first..=st.last)
                .map(|i| (s.starts[i], s.until(i)))
                .collect(),
            _ => vec![(self.start, self.end)],
        }
    }

    /// The window of `t`, which must be spliced already
    /// (`Timeline::spliced`); None without activities.
    pub fn new(t: &'a Timeline) -> Option<Self> {
        let calls = launch_spans(t);
        let steps = find_steps_with(t, &calls);
        let steady = steps.as_ref().map(|s| steady_steps(t, s, &calls));
        let mut acts = steady_activities(t, steps.as_ref(), steady.as_ref(), &calls);
        acts.sort_by_key(|a| a.start_ns);
        let first_start = acts.first()?.start_ns;
        let (start, window_end) = match (&steps, &steady) {
            (Some(s), Some(st)) => (opens_at(t, s, st, &calls, first_start), s.until(st.last)),
            _ => {
                let first_api = t
                    .api_calls
                    .iter()
                    .filter(|c| c.kind != ApiKind::Other)
                    .map(|c| c.start_ns)
                    .min();
                (
                    first_api.map_or(first_start, |s| s.min(first_start)),
                    i64::MIN,
                )
            }
        };
        let end = acts
            .iter()
            .map(|a| a.end_ns)
            .max()
            .unwrap_or(start)
            .max(window_end);
        Some(Window {
            t,
            calls,
            steps,
            steady,
            acts,
            start,
            end,
            wall: (end - start).max(1),
        })
    }

    /// Each activity's phase (as `timeline::phases`), where steps were found.
    pub fn phases(&self) -> Option<Phases> {
        let (s, st) = self.steady_steps()?;
        Some(phases_of(self.t, s, st, &self.calls))
    }

    /// The steps and their steady state, where steps were found.
    pub(super) fn steady_steps(&self) -> Option<(&Steps, &Steady)> {
        self.steps.as_ref().zip(self.steady.as_ref())
    }

    /// Steady steps in the window, where steps were found.
    pub(super) fn iterations(&self) -> Option<u64> {
        self.steady
            .as_ref()
            .map(|st| (st.last + 1 - st.first) as u64)
    }

    /// API calls of `kind` that start in the window.
    pub(super) fn count(&self, kind: ApiKind) -> u64 {
        self.t
            .api_calls
            .iter()
            .filter(|c| c.kind == kind)
            .filter(|c| c.start_ns >= self.start && c.start_ns <= self.end)
            .count() as u64
    }
}

/// Where the steady window opens. Where the host runs ahead of a busy GPU,
/// the first steady step is launched while earlier work still runs: the
/// window opens when that work is done (at the latest at the step's first
/// activity, `first_start`).
fn opens_at(t: &Timeline, s: &Steps, st: &Steady, calls: &CallSpans, first_start: i64) -> i64 {
    let launched = s.starts[st.first];
    let earlier_end = t
        .activities
        .iter()
        .zip(&st.step_of)
        .filter(|(a, k)| k.is_none_or(|i| i < st.first) && launched_at(a, calls).0 < launched)
        .map(|(a, _)| a.end_ns)
        .max()
        .unwrap_or(launched);
    let opens = launched.max(earlier_end.min(first_start));
    opens.min(first_start)
}
