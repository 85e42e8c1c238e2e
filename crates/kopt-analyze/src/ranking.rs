//! One ranking: every finding's predicted speed-up of the whole step, on one
//! base. The base is the step's wall time as it runs untraced where kopt
//! knows it (the bare run's step, else the traced step less the recorder's
//! cost), else the traced window, else the summed kernel time. A finding
//! that saves kernel time shortens the step as far as the GPU sets its pace:
//! saved x the GPU's busy share of the step (all of it when the GPU is busy
//! the whole step, little when launches set the pace). Graph capture's
//! prediction is already a step speed-up on the same base.

use kopt_model::{PredictedSpeedup, Recommendation, TimelineSummary};

/// A predicted range wider than this (high / low) means the model does not
/// know: the figure is dropped, and the finding says so.
pub const MAX_RANGE_RATIO: f64 = 3.0;

/// Id of the graph-capture finding (its prediction is a step speed-up).
pub const GRAPH_ID: &str = "capture_cuda_graph";
/// Id of the whole-model torch.compile finding (`compile.rs`; its
/// prediction is a step speed-up too).
pub const COMPILE_ID: &str = "use_torch_compile";
/// Id of the fp32 precision finding (`precision.rs`; its bf16 option adds
/// host work, so it predicts the step too).
pub const PRECISION_ID: &str = "enable_tf32";

/// The step the speed-ups are figured on.
#[derive(Debug, Clone, PartialEq)]
pub struct Base {
    /// Wall time per step (never below `busy_ns`).
    pub wall_ns: f64,
    /// GPU-busy time per step.
    pub busy_ns: f64,
    pub words: String,
    /// The host syncs inside the step: host and GPU take turns, so GPU
    /// time saved comes off the step in full (#35).
    pub serialized: bool,
    /// The host's own time per step (its issue time, less the time it sat
    /// blocked in syncs and the recorder's modelled cost), 0 where unknown:
    /// however much GPU time goes, the step cannot run faster than its host
    /// issues it (a host-bound step whose one sync waits 41 us gains
    /// nothing from faster kernels, #35).
    pub host_floor_ns: f64,
    /// GPU idle a step while the host prepares the input (0 unless the
    /// step is input-starved): the floor above then comes from it.
    pub input_wait_ns: f64,
}

impl Base {
    pub fn of(t: Option<&TimelineSummary>, total_kernel_ns: f64) -> Base {
        let mut base = Base::unserialized(t, total_kernel_ns);
        base.input_wait_ns = starved_wait(t, base.wall_ns);
        base.host_floor_ns =
            host_floor(t, base.input_wait_ns, base.wall_ns).map_or(0.0, |h| h.min(base.wall_ns));
        if let Some(h) = t
            .and_then(|t| t.host_syncs.as_ref())
            .filter(|h| h.serialized)
        {
            base.serialized = true;
            base.words = format!(
                "{}, whose {:.1} host syncs a step make the host and the GPU take turns (GPU time saved counts in full)",
                base.words, h.mid_step_per_step
            );
        }
        base
    }

    fn unserialized(t: Option<&TimelineSummary>, total_kernel_ns: f64) -> Base {
        let fmt = kopt_model::format_duration_ns;
        if let Some(p) = t.and_then(|t| t.graph_prediction.as_ref()) {
            let busy = p.busy_per_step_ns.max(0.0);
            let wall = p.eager_corrected_per_step_ns.max(busy);
            let words = if t.is_some_and(|t| t.steps.is_none()) {
                format!(
                    "the traced window as one step ({}, no repeating step found), less the recorder's cost",
                    fmt(wall)
                )
            } else if p.eager_measured_bare {
                format!(
                    "the step as it runs untraced ({}, timed in a bare run)",
                    fmt(wall)
                )
            } else {
                format!("the traced step less the recorder's cost ({})", fmt(wall))
            };
            return Base {
                wall_ns: wall,
                busy_ns: busy,
                words,
                serialized: false,
                host_floor_ns: 0.0,
                input_wait_ns: 0.0,
            };
        }
        // Steps without a graph-capture prediction (a step replayed from a
        // graph already): the traced step, whose recorder cost is one call
        // a graph launch.
        if let Some((t, n)) = t.and_then(|t| Some((t, t.iterations.filter(|n| *n > 0)?))) {
            let busy = t.gpu_busy_ns as f64 / n as f64;
            let wall = (t.wall_ns as f64 / n as f64).max(busy);
            return Base {
                wall_ns: wall,
                busy_ns: busy,
                words: format!("the traced step ({})", fmt(wall)),
                serialized: false,
                host_floor_ns: 0.0,
                input_wait_ns: 0.0,
            };
        }
        Base {
            wall_ns: total_kernel_ns,
            busy_ns: total_kernel_ns,
            words: format!(
                "the summed kernel time ({}; no timeline)",
                fmt(total_kernel_ns)
            ),
            serialized: false,
            host_floor_ns: 0.0,
            input_wait_ns: 0.0,
        }
    }

    /// The share of GPU time saved that comes off the step, 0..=1: the
    /// GPU's busy share of the step, all of it where syncs serialize it.
    pub fn busy_share(&self) -> f64 {
        if self.serialized {
            1.0
        } else if self.wall_ns > 0.0 {
            (self.busy_ns / self.wall_ns).clamp(0.0, 1.0)
        } else {
            1.0
        }
    }

    /// Step speed-ups (estimate, low, high) when shares (estimate, low,
    /// high) of the kernel time go: the estimate's saving comes off the step
    /// x the GPU's busy share, the low end's x that share again, the high
    /// end's all of it.
    /// The estimate and the low end stop at the host's own time per step
    /// (`host_floor_ns`); the high end, "all of it", does not (the floor
    /// rests on the recorder's modelled cost).
    pub fn kernel_share_speedups(&self, est: f64, lo: f64, hi: f64) -> (f64, f64, f64) {
        let b = self.busy_share();
        let high = self.speedup(hi, 1.0, false);
        let low = self.speedup(lo, b * b, true).min(high);
        (self.speedup(est, b, true).clamp(low, high), low, high)
    }

    /// Step speed-up when a share `f` (0..1) of the kernel time goes, the
    /// wall shrinking by `weight` of it, down to the host's own time per
    /// step when `floored`.
    fn speedup(&self, f: f64, weight: f64, floored: bool) -> f64 {
        if self.wall_ns <= 0.0 {
            return 1.0;
        }
        let mut saved = (f.clamp(0.0, 0.999) * self.busy_ns * weight).min(self.wall_ns * 0.999);
        if floored {
            saved = saved.min(self.floor_room());
        }
        self.wall_ns / (self.wall_ns - saved)
    }

    /// Said where the host's own time per step limits a kernel-time
    /// saving of share `f` (the estimate's): what the step can lose.
    pub fn host_floor_words(&self, f: f64) -> String {
        self.host_floor_words_ns(f.clamp(0.0, 0.999) * self.busy_ns * self.busy_share())
    }

    /// The same, for a saving of `saved` ns off the step.
    pub fn host_floor_words_ns(&self, saved: f64) -> String {
        if self.host_floor_ns <= 0.0 || saved <= self.wall_ns - self.host_floor_ns {
            return String::new();
        }
        let fmt = kopt_model::format_duration_ns;
        let own = if self.input_wait_ns > 0.0 {
            format!("the GPU waits {} a step for the host to prepare its input, so the host sets the pace: its own time is the step less its waits in syncs", fmt(self.input_wait_ns))
        } else {
            "its issue time less its waits in syncs and the recorder's modelled cost".to_string()
        };
        format!(
            "; but the step cannot run faster than its host issues it: {} a step of the host's own time ({own}), so at most {} comes off (estimate and low end)",
            fmt(self.host_floor_ns),
            fmt(self.floor_room())
        )
    }

    /// What the step can lose before it reaches the host's own time: the
    /// whole step where no floor is known.
    pub fn floor_room(&self) -> f64 {
        if self.host_floor_ns > 0.0 {
            (self.wall_ns - self.host_floor_ns).max(0.0)
        } else {
            self.wall_ns
        }
    }
}

/// The GPU's wait a step for the host to prepare its input, where it is
/// large enough for the step to count as input-starved (the prefetch
/// finding's threshold), else 0.
fn starved_wait(t: Option<&TimelineSummary>, wall_ns: f64) -> f64 {
    t.and_then(|t| t.host_copies.as_ref())
        .map_or(0.0, |c| crate::copies::starved_wait_ns(c, wall_ns))
}

/// The host's own time per step, where it is measured rather than
/// inferred. In a step that syncs with the host inside: the traced issue
/// time less the recorder's modelled cost
/// (`GraphPrediction::host_per_step_ns`), less the time it waited in those
/// syncs (it counts them, and they are the GPU's). In an input-starved
/// step (`input_wait_ns` > 0: the GPU idles each step until the host has
/// prepared its batch) the host sets the pace by that measurement: its own
/// time is the whole step less its waits in syncs. A step without either
/// runs its host ahead, and its issue time rests on the recorder's
/// modelled cost alone: on GPT-2 prefill with op ranges
/// (fixtures/ops-gpt2-h200) it came out at 90% of the step, yet padding
/// the LM head measured 1.48x, far below such a floor; so no floor there.
fn host_floor(t: Option<&TimelineSummary>, input_wait_ns: f64, wall_ns: f64) -> Option<f64> {
    let t = t?;
    let sync_wait = t.host_syncs.as_ref().map_or(0.0, |h| h.wait_per_step_ns);
    if input_wait_ns > 0.0 {
        return Some((wall_ns - sync_wait).max(0.0)).filter(|h| *h > 0.0);
    }
    t.host_syncs
        .as_ref()
        .filter(|h| h.mid_step_per_step > 0.0)?;
    let host = t.graph_prediction.as_ref()?.host_per_step_ns?;
    Some((host - sync_wait).max(0.0)).filter(|h| *h > 0.0)
}

/// Kernel-time shares (estimate, low, high) a finding saves: from its
/// kernel-time speed-up where it has one, else from its gain.
fn kernel_shares(r: &Recommendation) -> Option<(f64, f64, f64)> {
    let share = |s: f64| if s > 1.0 { 1.0 - 1.0 / s } else { 0.0 };
    if let Some(p) = &r.predicted_speedup {
        return Some((share(p.estimate), share(p.low), share(p.high)));
    }
    let g = r.gain.as_ref()?;
    let f = (g.workload_pct / 100.0).clamp(0.0, 1.0);
    Some((f, f, f))
}

/// `text` without its sentences that start "Predicted" (a figure).
fn without_predictions(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text.trim_end();
    while !rest.is_empty() {
        let end = rest.find(". ").map_or(rest.len(), |i| i + 2);
        let sentence = &rest[..end];
        if !sentence.trim_start().starts_with("Predicted") {
            out.push_str(sentence);
        }
        rest = &rest[end..];
    }
    out.trim_end().to_string()
}

/// `text` with "Graph capture predicts more here (N.NNx): the step" said
/// without the figure (withheld on graph capture's own finding).
fn without_graph_figure(text: &str) -> String {
    const OPEN: &str = "Graph capture predicts more here (";
    const THEN: &str = "x): the step";
    let Some(at) = text.find(OPEN) else {
        return text.to_string();
    };
    match text[at..].find(THEN) {
        Some(end) => format!("{}The step{}", &text[..at], &text[at + end + THEN.len()..]),
        None => text.to_string(),
    }
}

/// Batch-norm folding gains its kernels' time only where the bias goes into
/// the convolution's epilogue (torch.compile with freezing); folded in eager
/// mode it measured 0.99-1.03x. Its estimate is the middle of its range.
fn middle_of_range(id: &str) -> bool {
    id == crate::batchnorm::ID
}

/// Every finding's step speed-up on `base`, then the ranking: largest
/// estimate first; findings without a figure after every finding with one
/// (by their kernel's share of the time). Gains rewritten as shares of the
/// step so that every "% of the workload" has the same base.
pub fn rank(recs: &mut Vec<Recommendation>, base: &Base, kernel_share: impl Fn(&str) -> f64) {
    let b = base.busy_share();
    // What each finding ranks by: its estimate; where the figure is dropped
    // (range over 3x), the low end, what the model is sure of; none without
    // a figure at all.
    let mut keys: Vec<Option<f64>> = Vec::with_capacity(recs.len());
    let mut graph_withheld = false;
    for r in recs.iter_mut() {
        // Graph capture, torch.compile and the fp32 precision finding
        // (whose bf16 option adds host work) predict the step itself.
        let step = if r.id == GRAPH_ID
            || r.id == COMPILE_ID
            || r.id == PRECISION_ID
            || r.id == crate::host_syncs::ID
            || r.id == crate::copies::ID
            || r.id == crate::copies::PREFETCH_ID
            || r.id == crate::optimizer::ID
            || r.id == crate::optimizer::ZERO_GRAD_ID
        {
            r.predicted_speedup.clone()
        } else {
            kernel_shares(r).map(|(est, lo, hi)| {
                let (mut estimate, low, high) = base.kernel_share_speedups(est, lo, hi);
                if middle_of_range(&r.id) {
                    estimate = (low * high).sqrt();
                }
                let kernel_model = r
                    .predicted_speedup
                    .as_ref()
                    .map(|p| p.model.clone())
                    .or_else(|| r.gain.as_ref().map(|g| g.method.clone()))
                    .unwrap_or_default();
                PredictedSpeedup {
                    estimate,
                    low,
                    high,
                    model: format!(
                        "step speed-up on {}: the kernel time saved ({:.1}%, range {:.1}-{:.1}%) x the GPU's busy share of the step ({:.0}%) comes off the step; high: all of it, low: x the busy share again{}. Kernel-time model: {kernel_model}",
                        base.words,
                        100.0 * est,
                        100.0 * lo,
                        100.0 * hi,
                        100.0 * b,
                        base.host_floor_words(est)
                    ),
                }
            })
        };
        match step {
            Some(sp) if sp.low > 0.0 && sp.high / sp.low > MAX_RANGE_RATIO => {
                // Said once, with why: no "Predicted" sentence is left to
                // claim the figure withheld.
                r.evidence = format!(
                    "{} {}the prediction's range ({}) spans more than {MAX_RANGE_RATIO:.0}x, so the model does not know this step.",
                    without_predictions(&r.evidence),
                    kopt_model::FIGURE_WITHHELD,
                    kopt_model::figure::ratio_range(sp.low, sp.high, 1)
                );
                r.action = without_predictions(&r.action);
                if r.id == GRAPH_ID {
                    graph_withheld = true;
                }
                r.predicted_speedup = None;
                r.gain = None;
                keys.push(Some(sp.low));
            }
            Some(sp) => {
                keys.push(Some(sp.estimate));
                if let Some(g) = r.gain.as_mut() {
                    let pct = 100.0 * (1.0 - 1.0 / sp.estimate.max(1.0));
                    g.workload_pct = pct;
                    g.saved_ns = base.wall_ns * pct / 100.0;
                }
                r.predicted_speedup = Some(sp);
            }
            None => {
                r.predicted_speedup = None;
                keys.push(None);
            }
        }
    }
    if graph_withheld {
        // Other findings compare themselves with graph capture's figure.
        for r in recs.iter_mut() {
            r.evidence = without_graph_figure(&r.evidence);
        }
    }
    let mut keyed: Vec<(Option<f64>, Recommendation)> =
        keys.into_iter().zip(recs.drain(..)).collect();
    keyed.sort_by(|(ka, a), (kb, b)| match (ka, kb) {
        (Some(x), Some(y)) => y.total_cmp(x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => kernel_share(&b.kernel).total_cmp(&kernel_share(&a.kernel)),
    });
    recs.extend(keyed.into_iter().map(|(_, r)| r));
    for (i, r) in recs.iter_mut().enumerate() {
        r.rank = i + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::{BottleneckClass, GainEstimate};

    fn rec(id: &str, kernel_speedup: Option<(f64, f64)>, pct: Option<f64>) -> Recommendation {
        Recommendation {
            rank: 0,
            id: id.into(),
            title: id.into(),
            kernel: id.into(),
            kernel_short: id.into(),
            class: BottleneckClass::Memory,
            evidence: String::new(),
            action: String::new(),
            source: String::new(),
            gain: pct.map(|p| GainEstimate {
                kernel_pct: 100.0,
                workload_pct: p,
                saved_ns: 0.0,
                method: "m".into(),
            }),
            predicted_speedup: kernel_speedup.map(|(e, l)| PredictedSpeedup {
                estimate: e,
                low: l,
                high: e,
                model: "k".into(),
            }),
        }
    }

    fn graph(e: f64, l: f64, h: f64) -> Recommendation {
        let mut r = rec(GRAPH_ID, None, Some(10.0));
        r.predicted_speedup = Some(PredictedSpeedup {
            estimate: e,
            low: l,
            high: h,
            model: "g".into(),
        });
        r
    }

    #[test]
    fn gpu_bound_steps_rank_kernel_gains_over_graph_capture() {
        let base = Base {
            wall_ns: 10e6,
            busy_ns: 9.8e6,
            words: "w".into(),
            serialized: false,
            host_floor_ns: 0.0,
            input_wait_ns: 0.0,
        };
        let mut recs = vec![
            graph(1.02, 1.0, 1.05),
            rec("tiny", None, Some(0.1)),
            rec("use_channels_last", Some((2.7, 2.0)), Some(60.0)),
            rec("library", None, None),
        ];
        rank(&mut recs, &base, |_| 0.0);
        let ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["use_channels_last", GRAPH_ID, "tiny", "library"]);
        let tf32 = recs[0].predicted_speedup.as_ref().unwrap();
        assert!(
            tf32.estimate > 2.4 && tf32.estimate < 2.7,
            "{}",
            tf32.estimate
        );
        // Every gain is now a share of the same step.
        let g = recs[0].gain.as_ref().unwrap();
        assert!((g.workload_pct - 100.0 * (1.0 - 1.0 / tf32.estimate)).abs() < 1e-9);
        assert_eq!(recs[3].rank, 4);
    }

    #[test]
    fn launch_bound_steps_rank_graph_capture_first() {
        // The GPU is busy a quarter of the step: halving kernel time saves little.
        let base = Base {
            wall_ns: 4e6,
            busy_ns: 1e6,
            words: "w".into(),
            serialized: false,
            host_floor_ns: 0.0,
            input_wait_ns: 0.0,
        };
        let mut recs = vec![
            rec("use_channels_last", Some((1.3, 1.1)), Some(23.0)),
            graph(3.9, 3.5, 4.4),
        ];
        rank(&mut recs, &base, |_| 0.0);
        assert_eq!(recs[0].id, GRAPH_ID);
        let cl = recs[1].predicted_speedup.as_ref().unwrap();
        assert!(cl.estimate < 1.02, "{}", cl.estimate);
    }

    #[test]
    fn kernel_savings_stop_at_the_hosts_own_time() {
        // GPU busy 95% of the step, but the host needs 99% of it to issue
        // the step: halving kernel time barely shortens it (the estimate and
        // low end), while the high end keeps "all of it".
        let floored = Base {
            wall_ns: 3.35e6,
            busy_ns: 3.19e6,
            words: "w".into(),
            serialized: false,
            host_floor_ns: 3.31e6,
            input_wait_ns: 0.0,
        };
        let (est, low, high) = floored.kernel_share_speedups(0.4, 0.3, 0.5);
        assert!(est < 1.02 && low <= est, "{est} {low}");
        assert!(high > 1.5, "{high}");
        assert!(floored
            .host_floor_words(0.4)
            .contains("cannot run faster than its host"));
        // Without a host time the same saving counts by the busy share.
        let free = Base {
            host_floor_ns: 0.0,
            ..floored.clone()
        };
        let (est_free, _, _) = free.kernel_share_speedups(0.4, 0.3, 0.5);
        assert!(est_free > 1.5, "{est_free}");
        assert!(free.host_floor_words(0.4).is_empty());
        // A floor below what the saving reaches changes nothing.
        let low_floor = Base {
            host_floor_ns: 1.0e6,
            ..floored
        };
        assert_eq!(low_floor.kernel_share_speedups(0.4, 0.3, 0.5).0, est_free);
    }

    #[test]
    fn an_input_starved_step_is_floored_at_the_hosts_time() {
        // The GPU waits 10 ms a step for its input: the host sets the pace,
        // and its own time is the step less its 1 ms of sync waits.
        let floored = Base {
            wall_ns: 30e6,
            busy_ns: 20e6,
            words: "w".into(),
            serialized: false,
            host_floor_ns: 29e6,
            input_wait_ns: 10e6,
        };
        assert_eq!(floored.floor_room(), 1e6);
        let (est, _, high) = floored.kernel_share_speedups(0.5, 0.4, 0.6);
        assert!((est - 30.0 / 29.0).abs() < 1e-9, "{est}");
        assert!(high > 1.5, "{high}");
        let words = floored.host_floor_words(0.5);
        assert!(
            words.contains("waits 10.00 ms a step for the host to prepare its input"),
            "{words}"
        );
    }

    #[test]
    fn a_range_wider_than_three_times_drops_the_figure() {
        let base = Base {
            wall_ns: 4e6,
            busy_ns: 1e6,
            words: "w".into(),
            serialized: false,
            host_floor_ns: 0.0,
            input_wait_ns: 0.0,
        };
        let mut recs = vec![
            graph(3.0, 1.0, 229.9),
            rec("fuse", Some((1.1, 1.0)), Some(5.0)),
        ];
        rank(&mut recs, &base, |_| 0.0);
        // Ranked by its low end (1.0x): below a finding sure of more.
        assert_eq!(recs[0].id, "fuse");
        assert!(recs[1].predicted_speedup.is_none());
        assert!(recs[1].evidence.contains("does not know"));
        // A low end above the others' estimates still ranks first.
        let mut recs = vec![
            rec("fuse", Some((1.1, 1.0)), Some(5.0)),
            graph(6.0, 2.0, 9.0),
        ];
        rank(&mut recs, &base, |_| 0.0);
        assert_eq!(recs[0].id, GRAPH_ID);
        assert!(recs[0].predicted_speedup.is_none());
    }
}
