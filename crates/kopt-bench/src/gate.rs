//! The in-process gate's decision (`kopt.bench(baseline=fn, candidate=fn)`):
//! what the harness measured and observed, in plain numbers and flags
//! ([`GateFacts`]), in; the verdict per shape and overall, out. The harness
//! (Python, torch) only collects facts; every rule lives here, so the same
//! facts always give the same verdict and each rule is tested without a GPU.
//!
//! The timing verdict is the process-level bench's ([`crate::decide`] on a
//! bootstrap interval of the median ratio); a candidate caught gaming the
//! measurement gets SUSPECT with a named reason instead, never KEEP.

use serde::Deserialize;

use crate::compare::default_tolerance;
use crate::stats::{bootstrap_median_ratio, median, outliers, relative_noise};
use crate::verdict::decide;
use kopt_model::{
    BenchReport, GateReport, GateShape, Peaks, SuspectReason, Suspicion, VariantResult, Verdict,
    VerdictKind,
};

/// One side's timed calls, in the order taken.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SideFacts {
    /// The caller's name for the callable.
    pub name: String,
    /// Seconds per call: a start event to an event recorded after
    /// synchronising the whole device (so every stream's work counts).
    pub event_s: Vec<f64>,
    /// The same start event to an event on the caller's stream recorded as
    /// soon as the call returned (no synchronisation).
    pub stream_s: Vec<f64>,
    /// Host seconds around the same window (device synchronised before and after).
    pub wall_s: Vec<f64>,
    /// With kopt's tracer: kernels launched during each timed call.
    pub kernels: Option<Vec<u32>>,
    /// With kopt's tracer: first kernel start to last kernel end, per call.
    pub kernel_s: Option<Vec<f64>>,
    /// With kopt's tracer: kernels of each call that ran outside its window.
    pub outside_window: Option<Vec<u32>>,
    /// Seconds per call with L2 flushed before each (`flush_l2=True`), same window as `event_s`.
    pub flushed_s: Vec<f64>,
}

/// One checked call: the candidate on fresh inputs (run first), then the
/// reference on the same inputs, compared.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CheckFacts {
    /// Which checked call (0-based).
    pub call: usize,
    /// The candidate raised (its message) or returned something unreadable.
    pub error: Option<String>,
    /// Element types as kopt writes them (f64, f32, bf16, f16, i64, ...).
    pub ref_dtype: String,
    pub cand_dtype: String,
    pub shape_matches: bool,
    /// Relative L2 error of the candidate's output against the reference's
    /// (over the elements finite in both); None when it cannot be computed.
    pub rel_l2: Option<f64>,
    /// Candidate elements NaN or infinite where the reference's are finite.
    pub nonfinite: u64,
    /// Candidate elements still holding the poison the harness wrote before the call.
    pub poison_left: u64,
    /// The candidate's output shares storage with an input.
    pub aliases_input: bool,
    /// The reference's output shares storage with an input (an in-place op).
    pub ref_aliases_input: bool,
    /// The candidate's output equals (bit for bit) its output of this earlier
    /// checked call, whose inputs and reference output differed.
    pub repeats_call: Option<usize>,
    /// Read on the caller's stream right after the call returned, the output
    /// differed from what it held once the device was synchronised.
    pub stale_on_stream: bool,
    /// Fraction of the candidate's / reference's elements whose low mantissa
    /// bits (those a 16-bit float, or fp8 for 16-bit outputs, lacks) are zero.
    pub cand_low_bits_zero: Option<f64>,
    pub ref_low_bits_zero: Option<f64>,
    /// Relative L2 error of the reference's / candidate's output against
    /// the baseline run on float64 copies of the inputs (None where the
    /// harness could not run it).
    pub wide_ref_err: Option<f64>,
    pub wide_cand_err: Option<f64>,
}

/// Everything the harness saw on one input shape.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ShapeFacts {
    pub shape: String,
    pub baseline: SideFacts,
    pub candidate: SideFacts,
    pub checks: Vec<CheckFacts>,
    /// Bytes and floating-point operations one call moves / does, as the caller gave them.
    pub bytes: Option<f64>,
    pub flops: Option<f64>,
    /// Harness functions (timers, synchronisation) the candidate replaced.
    pub tampered: Vec<String>,
}

/// What the harness measured, for every shape.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct GateFacts {
    pub device: Option<String>,
    /// The device's L2 cache, bytes.
    pub l2_bytes: Option<f64>,
    /// Median timed window of a call that does nothing (the harness's floor).
    pub empty_window_s: Option<f64>,
    /// Median timed window of a call that launches one tiny kernel, timed
    /// beside the empty one: between the two lies "no kernel ran".
    pub kernel_window_s: Option<f64>,
    pub shapes: Vec<ShapeFacts>,
    pub seconds: f64,
    pub notes: Vec<String>,
}

/// How the verdict is decided (the process-level bench's settings).
#[derive(Debug, Clone)]
pub struct GateSettings {
    pub threshold: f64,
    pub noise: f64,
    pub seed: u64,
    /// Relative-L2 tolerance; None: by the reference's dtype.
    pub tol: Option<f64>,
    pub resamples: usize,
    pub confidence: f64,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            threshold: 0.05,
            noise: 0.01,
            seed: 42,
            tol: None,
            resamples: 2000,
            confidence: 0.95,
        }
    }
}

/// A rate this far above the device's DRAM peak is impossible from DRAM
/// (measurement and datasheet slack).
const DRAM_SLACK: f64 = 1.10;
/// Warm data that fits in L2 may move faster than DRAM, not this much faster.
const L2_OVER_DRAM: f64 = 6.0;
/// The FLOP/s bound: twice the dense 16-bit tensor rate (fp8, sparsity).
const FLOPS_OVER_TENSOR: f64 = 2.0;
/// Time a candidate's window may run past its stream beyond the baseline's.
const SIDE_STREAM_MIN_S: f64 = 5e-6;
const SIDE_STREAM_FRACTION: f64 = 0.10;
/// Host time beyond the GPU window, more than the baseline's, that no
/// honest call shows (a replaced timer, GPU work the events missed).
const WALL_EXCESS_MIN_S: f64 = 100e-6;

fn us(s: f64) -> String {
    format!("{:.1} us", s * 1e6)
}

/// Bits of precision by dtype name, for "below the reference's".
/// How many times the baseline's own error against a float64 run a
/// candidate's may be before it counts as computed at lower precision: a
/// reordered reduction in the same dtype stays within a few times.
const WIDE_ERROR_RATIO: f64 = 8.0;

/// The error a float of this many significand bits makes anyway (16 of
/// its unit roundoffs), below which no error is a sign of lower precision.
fn precision_floor(rank: u32) -> f64 {
    16.0 * 2f64.powi(-(rank as i32))
}

/// Why a checked call's candidate is far less precise than the baseline,
/// both measured against the baseline run in float64; None where it is not
/// or the float64 run is missing.
fn far_less_precise(c: &CheckFacts) -> Option<String> {
    let (r, k) = (c.wide_ref_err?, c.wide_cand_err?);
    let floor = precision_floor(precision_rank(&c.ref_dtype)?);
    let allowed = WIDE_ERROR_RATIO * r.max(floor);
    (k.is_finite() && k > allowed).then(|| {
        format!(
            "error {k:.2e} against the baseline run in float64, {:.0} times the baseline's own ({r:.2e}, floor {floor:.0e}): computed at lower precision",
            k / r.max(floor)
        )
    })
}

fn precision_rank(dtype: &str) -> Option<u32> {
    Some(match dtype {
        "f64" => 53,
        "f32" => 24,
        "f16" => 11,
        "bf16" => 8,
        "f8e4m3" | "f8e4m3fn" | "f8e4m3fnuz" => 4,
        "f8e5m2" | "f8e5m2fnuz" => 3,
        _ => return None,
    })
}

/// The verdict on every shape and overall. Errors name what is missing
/// from the facts (no samples, no shape); they never panic.
pub fn judge(
    facts: &GateFacts,
    settings: &GateSettings,
    peaks: &Peaks,
) -> Result<GateReport, String> {
    if facts.shapes.is_empty() {
        return Err("the harness measured no shape".into());
    }
    let mut shapes = Vec::with_capacity(facts.shapes.len());
    for (i, s) in facts.shapes.iter().enumerate() {
        shapes.push(judge_shape(facts, s, i, settings, peaks)?);
    }
    let verdict = shapes
        .iter()
        .map(|s| s.verdict)
        .fold(VerdictKind::Keep, VerdictKind::worst);
    Ok(GateReport {
        schema: kopt_model::SCHEMA.into(),
        device: facts.device.clone(),
        shapes,
        verdict,
        seconds: facts.seconds,
        notes: facts.notes.clone(),
    })
}

fn judge_shape(
    facts: &GateFacts,
    s: &ShapeFacts,
    index: usize,
    settings: &GateSettings,
    peaks: &Peaks,
) -> Result<GateShape, String> {
    let label = if s.shape.is_empty() {
        "default".to_string()
    } else {
        s.shape.clone()
    };
    for (side, f) in [("baseline", &s.baseline), ("candidate", &s.candidate)] {
        if f.event_s.len() < 3 {
            return Err(format!(
                "shape {label}: the {side} has {} timed calls; the verdict needs at least 3",
                f.event_s.len()
            ));
        }
        if f.event_s.iter().any(|t| !t.is_finite() || *t < 0.0) {
            return Err(format!(
                "shape {label}: the {side}'s timings hold a negative or non-finite value"
            ));
        }
    }
    let (correct, problems, mut suspect) = check_outputs(&s.checks, settings.tol);
    suspect.extend(check_timing(facts, s));
    suspect.extend(check_peaks(facts, s, peaks));
    let seed = settings.seed.wrapping_add(index as u64);
    let warm = bench_report(
        facts,
        s,
        |f| &f.event_s,
        settings,
        seed,
        correct,
        &problems,
        "CUDA events, device synchronised, in-process",
    )?;
    let flushed = if !s.baseline.flushed_s.is_empty() || !s.candidate.flushed_s.is_empty() {
        Some(bench_report(
            facts,
            s,
            |f| &f.flushed_s,
            settings,
            seed,
            correct,
            &problems,
            "CUDA events, L2 flushed before each call, in-process",
        )?)
    } else {
        None
    };
    if let Some(fl) = &flushed {
        if warm.verdict == VerdictKind::Keep && fl.verdict != VerdictKind::Keep {
            let ratio = |r: &BenchReport| r.candidates()[0].speedup_vs_first;
            suspect.push(Suspicion {
                reason: SuspectReason::L2Flattered,
                detail: format!(
                    "{:.2}x faster with warm L2 but {:.2}x ({}) with L2 flushed before each call",
                    ratio(&warm),
                    ratio(fl),
                    fl.verdict
                ),
            });
        }
    }
    suspect.sort_by_key(|x| x.reason);
    suspect.dedup_by_key(|x| x.reason);
    let mut warm = warm;
    let mut flushed = flushed;
    if !suspect.is_empty() {
        let v = suspect_verdict(&suspect);
        for r in std::iter::once(&mut warm).chain(flushed.as_mut()) {
            r.variants[1].verdict = Some(v.clone());
            r.verdict = VerdictKind::Suspect;
        }
    }
    let verdict = flushed
        .as_ref()
        .map_or(warm.verdict, |f| warm.verdict.worst(f.verdict));
    Ok(GateShape {
        shape: label,
        warm,
        flushed,
        suspect,
        checked_calls: s.checks.len(),
        verdict,
    })
}

fn suspect_verdict(suspect: &[Suspicion]) -> Verdict {
    let reason = suspect
        .iter()
        .map(|x| format!("{}: {}", x.reason, x.detail))
        .collect::<Vec<_>>()
        .join("; ");
    Verdict {
        kind: VerdictKind::Suspect,
        reason,
        next: "do not trust this candidate's time: fix what the gate names and measure again"
            .into(),
    }
}

#[allow(clippy::too_many_arguments)] // one report per timing mode, same inputs
fn bench_report(
    facts: &GateFacts,
    s: &ShapeFacts,
    pick: impl Fn(&SideFacts) -> &Vec<f64>,
    settings: &GateSettings,
    seed: u64,
    correct: Option<bool>,
    problems: &[String],
    source: &str,
) -> Result<BenchReport, String> {
    let (b, c) = (pick(&s.baseline), pick(&s.candidate));
    // The window's own cost (the synchronisation's tail, at most an empty
    // call's window) comes off both sides: it dilutes the ratio of short
    // calls. A candidate's unjoined side-stream work stays in.
    let offset = window_offset(facts, s);
    let less = |v: &Vec<f64>| -> Vec<f64> { v.iter().map(|t| (t - offset).max(1e-9)).collect() };
    let (b, c) = (&less(b), &less(c));
    let source = if offset > 0.0 {
        format!("{source}, less the window's own {}", us(offset))
    } else {
        source.to_string()
    };
    let source = source.as_str();
    if b.len() < 3 || c.len() < 3 {
        return Err(format!(
            "shape {}: {} and {} samples ({source}); the verdict needs at least 3 each",
            s.shape,
            b.len(),
            c.len()
        ));
    }
    let interval = bootstrap_median_ratio(b, c, settings.resamples, settings.confidence, seed)
        .ok_or_else(|| format!("shape {}: no interval from the samples", s.shape))?;
    let verdict = decide(&interval, settings.threshold, settings.noise, correct);
    let (mb, mc) = (median(b).unwrap_or(0.0), median(c).unwrap_or(0.0));
    let variant = |f: &SideFacts, values: &Vec<f64>, m: f64, first: bool| VariantResult {
        name: if first { "baseline" } else { "candidate" }.into(),
        command: f.name.clone(),
        source: source.into(),
        samples: values.len(),
        values_s: values.clone(),
        outliers: outliers(values).len(),
        median_s: m,
        relative_noise: relative_noise(values),
        speedup_vs_first: if m > 0.0 { mb / m } else { f64::INFINITY },
        ratio_interval: (!first).then_some(interval),
        verdict: (!first).then(|| verdict.clone()),
        correct: if first { None } else { correct },
        check_problems: if first { Vec::new() } else { problems.to_vec() },
    };
    Ok(BenchReport {
        schema: kopt_model::SCHEMA.into(),
        threshold: settings.threshold,
        noise: settings.noise,
        seed,
        device: facts.device.clone(),
        variants: vec![
            variant(&s.baseline, b, mb, true),
            variant(&s.candidate, c, mc, false),
        ],
        verdict: verdict.kind,
        notes: Vec::new(),
    })
}

/// The output defenses: correctness over every checked call, and the named
/// ways a candidate's output games the check.
fn check_outputs(
    checks: &[CheckFacts],
    tol: Option<f64>,
) -> (Option<bool>, Vec<String>, Vec<Suspicion>) {
    if checks.is_empty() {
        return (None, Vec::new(), Vec::new());
    }
    let mut suspect = Vec::new();
    let mut problems = Vec::new();
    let mut right = Vec::new();
    fn add(suspect: &mut Vec<Suspicion>, reason: SuspectReason, detail: String) {
        suspect.push(Suspicion { reason, detail });
    }
    for c in checks {
        let n = c.call + 1;
        if let Some(e) = &c.error {
            problems.push(format!("checked call {n}: {e}"));
            right.push(false);
            continue;
        }
        if c.aliases_input && !c.ref_aliases_input {
            add(
                &mut suspect,
                SuspectReason::AliasesInput,
                format!("checked call {n} returned a view of an input (their storage overlaps)"),
            );
        }
        if c.stale_on_stream {
            add(&mut suspect, SuspectReason::SideStream, format!("checked call {n}: the output read on the caller's stream as the call returned differed from the output once the device was synchronised (work on a stream the caller does not wait for)"));
        }
        if c.poison_left > 0 {
            add(&mut suspect, SuspectReason::PartialOutput, format!("checked call {n}: {} output elements still held the NaN poison written before the call (never computed)", c.poison_left));
        }
        let (rr, cr) = (precision_rank(&c.ref_dtype), precision_rank(&c.cand_dtype));
        if let (Some(r), Some(k)) = (rr, cr) {
            if k < r {
                add(
                    &mut suspect,
                    SuspectReason::LowerPrecision,
                    format!(
                        "checked call {n} returned {} where the reference returns {}",
                        c.cand_dtype, c.ref_dtype
                    ),
                );
            }
        }
        if let (Some(cz), Some(rz)) = (c.cand_low_bits_zero, c.ref_low_bits_zero) {
            if cz >= 0.9 && rz < 0.5 && cr.is_some_and(|k| k >= 11) {
                add(&mut suspect, SuspectReason::LowerPrecision, format!("checked call {n}: {:.0}% of the output's values fit a narrower float (their low mantissa bits are zero; the reference's: {:.0}%): computed at lower precision and widened", 100.0 * cz, 100.0 * rz));
            }
        }
        if let Some(why) = far_less_precise(c) {
            add(
                &mut suspect,
                SuspectReason::LowerPrecision,
                format!("checked call {n}: {why}"),
            );
        }
        let limit = tol.unwrap_or_else(|| default_tolerance(&c.ref_dtype, false));
        let ok = c.shape_matches
            && c.nonfinite == 0
            && c.poison_left == 0
            && c.rel_l2.is_some_and(|e| e <= limit);
        if !c.shape_matches {
            problems.push(format!("checked call {n}: the output's shape differs"));
        } else if c.nonfinite > 0 {
            problems.push(format!(
                "checked call {n}: {} NaN/Inf where the reference is finite",
                c.nonfinite
            ));
        } else if let Some(e) = c.rel_l2.filter(|e| *e > limit) {
            problems.push(format!(
                "checked call {n}: relative L2 error {e:.2e} above the tolerance {limit:.1e}"
            ));
            // Beyond the reference's precision but within a 16-bit float's:
            // the work was done at lower precision.
            if tol.is_none() && rr.is_some_and(|r| r >= 24) && e <= default_tolerance("bf16", false)
            {
                add(&mut suspect, SuspectReason::LowerPrecision, format!("checked call {n}: relative L2 error {e:.2e} fits a 16-bit float's precision, not the reference's {} ({limit:.0e})", c.ref_dtype));
            }
        } else if c.rel_l2.is_none() {
            problems.push(format!(
                "checked call {n}: the outputs could not be compared"
            ));
        }
        if !ok {
            if let Some(k) = c.repeats_call {
                add(
                    &mut suspect,
                    SuspectReason::CachedOutput,
                    format!(
                        "checked call {n} returned checked call {}'s result for new inputs",
                        k + 1
                    ),
                );
            }
        }
        right.push(ok);
    }
    // The first few problems say what went wrong; the count says how often.
    const SHOWN: usize = 5;
    if problems.len() > SHOWN {
        let more = problems.len() - SHOWN;
        problems.truncate(SHOWN);
        problems.push(format!("... and {more} more like these"));
    }
    let passed = right.iter().filter(|r| **r).count();
    if passed > 0 && passed < right.len() && suspect.is_empty() {
        let wrong: Vec<String> = right
            .iter()
            .enumerate()
            .filter(|(_, r)| !**r)
            .map(|(i, _)| (checks[i].call + 1).to_string())
            .collect();
        add(
            &mut suspect,
            SuspectReason::InconsistentOutput,
            format!(
                "right on {passed} of {} checked calls, wrong on call(s) {}",
                right.len(),
                wrong.join(", ")
            ),
        );
    }
    (Some(passed == right.len()), problems, suspect)
}

fn med(v: &[f64]) -> Option<f64> {
    median(v)
}

/// The timed window's own cost: the baseline's median tail after its stream
/// finished (the device synchronisation), at most an empty call's window.
fn window_offset(facts: &GateFacts, s: &ShapeFacts) -> f64 {
    let b = &s.baseline;
    let (Some(floor), true) = (facts.empty_window_s, b.stream_s.len() == b.event_s.len()) else {
        return 0.0;
    };
    med(&diffs(&b.event_s, &b.stream_s)).map_or(0.0, |tail| tail.clamp(0.0, floor.max(0.0)))
}

/// Per-call differences a - b, over the calls both have.
fn diffs(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// The timing defenses: work the caller's stream does not wait for, no GPU
/// work at all, clocks that disagree, replaced harness functions.
fn check_timing(facts: &GateFacts, s: &ShapeFacts) -> Vec<Suspicion> {
    let mut out = Vec::new();
    let mut add = |reason, detail: String| out.push(Suspicion { reason, detail });
    let (b, c) = (&s.baseline, &s.candidate);
    let mc = med(&c.event_s).unwrap_or(0.0);
    let mb = med(&b.event_s).unwrap_or(0.0);
    if !s.tampered.is_empty() {
        add(
            SuspectReason::HarnessTampered,
            format!(
                "the candidate replaced {} during its calls",
                s.tampered.join(", ")
            ),
        );
    }
    // Side stream: how long the device-wide window outlasts the caller's stream.
    if c.stream_s.len() == c.event_s.len() && b.stream_s.len() == b.event_s.len() {
        if let (Some(tc), Some(tb)) = (
            med(&diffs(&c.event_s, &c.stream_s)),
            med(&diffs(&b.event_s, &b.stream_s)),
        ) {
            let excess = tc - tb;
            if excess > SIDE_STREAM_MIN_S.max(SIDE_STREAM_FRACTION * mc) {
                add(SuspectReason::SideStream, format!("its GPU work outlasts the caller's stream by {} per call ({} beyond the baseline's): work on a stream the caller does not wait for", us(tc), us(excess)));
            }
        }
    }
    if let Some(outside) = &c.outside_window {
        let n: u32 = outside.iter().sum();
        if n > 0 {
            add(
                SuspectReason::SideStream,
                format!("the tracer saw {n} of its kernels run outside their call's timed window"),
            );
        }
    }
    // No GPU work.
    match &c.kernels {
        Some(k) if !k.is_empty() && k.iter().all(|n| *n == 0) => {
            add(
                SuspectReason::NoKernel,
                "the tracer saw no kernel in any of its timed calls".into(),
            );
        }
        Some(_) => {}
        None => {
            if let Some(floor) = facts.empty_window_s {
                // Closer to an empty call's window than to a one-kernel
                // call's; without the latter, within 20% of the empty one.
                let limit = match facts.kernel_window_s {
                    Some(k) if k > floor => (floor + k) / 2.0,
                    _ => 1.2 * floor + 1e-6,
                };
                if mc <= limit && mb > 2.0 * limit {
                    let one = facts
                        .kernel_window_s
                        .map_or(String::new(), |k| format!(", one tiny kernel's {}", us(k)));
                    add(SuspectReason::NoKernel, format!("its calls take {} on the GPU, nearer an empty call's {}{one} (the baseline: {}): no kernel ran", us(mc), us(floor), us(mb)));
                }
            }
        }
    }
    // Clocks: the event window sits inside the host window around it.
    if c.wall_s.len() == c.event_s.len() && b.wall_s.len() == b.event_s.len() {
        let over: Vec<f64> = c
            .event_s
            .iter()
            .zip(&c.wall_s)
            .map(|(e, w)| e - w)
            .collect();
        if let Some(o) = med(&over).filter(|o| *o > 5e-6 + 0.05 * mc) {
            add(SuspectReason::TimingDisagrees, format!("its CUDA-event time exceeds the host time around the same calls by {} (median): the events cannot be trusted", us(o)));
        }
        if let (Some(wc), Some(wb)) = (
            med(&diffs(&c.wall_s, &c.event_s)),
            med(&diffs(&b.wall_s, &b.event_s)),
        ) {
            let excess = wc - wb;
            if excess > WALL_EXCESS_MIN_S.max(mc) {
                add(SuspectReason::TimingDisagrees, format!("the host waits {} per call beyond its CUDA-event time ({} more than the baseline): work or time the events do not see", us(wc), us(excess)));
            }
        }
    }
    if let Some(ks) = &c.kernel_s {
        if let Some(k) = med(ks) {
            if k > 1.10 * mc + 2e-6 {
                add(
                    SuspectReason::TimingDisagrees,
                    format!(
                        "the tracer's kernel time {} exceeds its CUDA-event time {}",
                        us(k),
                        us(mc)
                    ),
                );
            }
        }
    }
    out
}

/// Rates above what the device can do, for the bytes / FLOPs the caller gave.
fn check_peaks(facts: &GateFacts, s: &ShapeFacts, peaks: &Peaks) -> Vec<Suspicion> {
    let mut out = Vec::new();
    // The cold timing when there is one: warm data may come from L2.
    let cold = !s.candidate.flushed_s.is_empty() && !s.baseline.flushed_s.is_empty();
    let pick =
        |f: &SideFacts| med(if cold { &f.flushed_s } else { &f.event_s }).filter(|t| *t > 0.0);
    let (Some(tc), Some(tb)) = (pick(&s.candidate), pick(&s.baseline)) else {
        return out;
    };
    if let (Some(bytes), Some(dram)) = (s.bytes.filter(|b| *b > 0.0), peaks.dram_bytes_per_s) {
        let resident = !cold && facts.l2_bytes.is_none_or(|l2| bytes <= 2.0 * l2);
        let limit = if resident {
            L2_OVER_DRAM * dram
        } else {
            DRAM_SLACK * dram
        };
        let (rc, rb) = (bytes / tc, bytes / tb);
        if rc > limit && rb <= limit {
            out.push(Suspicion {
                reason: SuspectReason::AbovePeak,
                detail: format!(
                    "{:.0} GB/s for the {:.3e} bytes a call moves, above the {:.0} GB/s {}",
                    rc / 1e9,
                    bytes,
                    limit / 1e9,
                    if resident {
                        "any cache on this device gives"
                    } else {
                        "DRAM peak"
                    }
                ),
            });
        }
    }
    let top = [peaks.tensor_bf16_flops, peaks.fp32_flops]
        .into_iter()
        .flatten()
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    if let (Some(flops), Some(top)) = (s.flops.filter(|f| *f > 0.0), top) {
        let limit = FLOPS_OVER_TENSOR * top;
        let (rc, rb) = (flops / tc, flops / tb);
        if rc > limit && rb <= limit {
            out.push(Suspicion {
                reason: SuspectReason::AbovePeak,
                detail: format!(
                    "{:.0} TFLOP/s, above the device's {:.0} TFLOP/s",
                    rc / 1e12,
                    limit / 1e12
                ),
            });
        }
    }
    out
}

/// Notes on figures the caller gave that even the baseline cannot reach.
pub fn peak_notes(facts: &GateFacts, peaks: &Peaks) -> Vec<String> {
    let mut notes = Vec::new();
    for s in &facts.shapes {
        let Some(tb) = med(&s.baseline.event_s).filter(|t| *t > 0.0) else {
            continue;
        };
        if let (Some(bytes), Some(dram)) = (s.bytes, peaks.dram_bytes_per_s) {
            if bytes / tb > L2_OVER_DRAM * dram {
                notes.push(format!("shape {}: bytes={bytes:.3e} makes even the baseline run at {:.0} GB/s: is the figure per call?", s.shape, bytes / tb / 1e9));
            }
        }
    }
    notes
}

/// The prefix of the NVTX ranges the harness puts around each timed call
/// when kopt's tracer records the process: `kopt.gate/<shape>/<warm|cold>/<side>/<n>`.
pub const RANGE_PREFIX: &str = "kopt.gate/";

/// Slack between the host's and the GPU's timestamps, ns.
const CLOCK_SLACK_NS: i64 = 2_000;

/// Fill the tracer's facts from a traced run of the harness: per timed call
/// of each side its kernels (copies and sets count as GPU work too) and
/// their span, and for the candidate the GPU work launched outside every
/// timed call that ran inside one (a background thread's, a side stream
/// left running). Returns how many timed calls the trace marked.
pub fn add_tracer_facts(facts: &mut GateFacts, timeline: &kopt_model::Timeline) -> usize {
    struct Mark {
        shape: usize,
        warm: bool,
        candidate: bool,
        n: usize,
        start: i64,
        end: i64,
    }
    let mut marks: Vec<Mark> = timeline
        .ranges
        .iter()
        .filter_map(|r| {
            let mut f = r.name.strip_prefix(RANGE_PREFIX)?.split('/');
            let shape = f.next()?.parse().ok()?;
            let warm = match f.next()? {
                "warm" => true,
                "cold" => false,
                _ => return None,
            };
            let candidate = match f.next()? {
                "candidate" => true,
                "baseline" => false,
                _ => return None,
            };
            let n = f.next()?.parse().ok()?;
            Some(Mark {
                shape,
                warm,
                candidate,
                n,
                start: r.start_ns,
                end: r.end_ns,
            })
        })
        .collect();
    if marks.is_empty() {
        return 0;
    }
    marks.sort_by_key(|m| m.start);
    let launched: std::collections::HashMap<u64, i64> = timeline
        .api_calls
        .iter()
        .map(|a| (a.correlation, a.start_ns))
        .collect();
    // The mark whose host interval holds t.
    let holding = |t: i64| {
        let i = marks.partition_point(|m| m.start <= t);
        (i > 0 && t <= marks[i - 1].end).then(|| i - 1)
    };
    let mut count = vec![0u32; marks.len()];
    let mut span: Vec<Option<(i64, i64)>> = vec![None; marks.len()];
    let mut foreign = vec![0u32; marks.len()];
    for a in &timeline.activities {
        match launched.get(&a.correlation).and_then(|t| holding(*t)) {
            Some(i) => {
                count[i] += 1;
                span[i] = Some(span[i].map_or((a.start_ns, a.end_ns), |(s, e)| {
                    (s.min(a.start_ns), e.max(a.end_ns))
                }));
            }
            None => {
                // Launched outside every timed call: it must not run inside one.
                let i = marks.partition_point(|m| m.start < a.end_ns - CLOCK_SLACK_NS);
                for m in (0..i).rev() {
                    if marks[m].end > a.start_ns + CLOCK_SLACK_NS {
                        foreign[m] += 1;
                        break;
                    }
                    if marks[m].end < a.start_ns {
                        break;
                    }
                }
            }
        }
    }
    for (shape_index, s) in facts.shapes.iter_mut().enumerate() {
        let mut stray = 0u32;
        for side in [false, true] {
            let f = if side {
                &mut s.candidate
            } else {
                &mut s.baseline
            };
            let n = f.event_s.len();
            let (mut k, mut ks, mut out) = (vec![0u32; n], vec![0f64; n], vec![0u32; n]);
            let mut seen = false;
            for (i, m) in marks.iter().enumerate() {
                if m.shape != shape_index || m.candidate != side {
                    continue;
                }
                if !m.warm {
                    stray += foreign[i];
                    continue;
                }
                if m.n < n {
                    seen = true;
                    k[m.n] = count[i];
                    ks[m.n] = span[i].map_or(0.0, |(a, b)| (b - a) as f64 / 1e9);
                    out[m.n] = foreign[i];
                }
            }
            if seen {
                f.kernels = Some(k);
                f.kernel_s = Some(ks);
                if side {
                    f.outside_window = Some(out);
                } else {
                    stray += out.iter().sum::<u32>();
                }
            }
        }
        // Work that ran inside the baseline's windows (or the flushed
        // ones) but was launched by no timed call: the candidate's doing.
        if stray > 0 {
            if let Some(o) = s.candidate.outside_window.as_mut() {
                o.push(stray);
            } else {
                s.candidate.outside_window = Some(vec![stray]);
            }
        }
    }
    marks.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake timer: `n` calls around `base` seconds with seeded jitter.
    fn times(base: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut r = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| base * (1.0 + 0.01 * (r.f64() - 0.5)))
            .collect()
    }

    /// A side as an honest harness sees it: the stream ends 8 us before
    /// the device-wide window, the host window 20 us after it.
    fn side(name: &str, base: f64, seed: u64) -> SideFacts {
        let event_s = times(base, 40, seed);
        SideFacts {
            name: name.into(),
            stream_s: event_s.iter().map(|t| t - 8e-6).collect(),
            wall_s: event_s.iter().map(|t| t + 20e-6).collect(),
            event_s,
            ..SideFacts::default()
        }
    }

    fn good_check(call: usize) -> CheckFacts {
        CheckFacts {
            call,
            ref_dtype: "f32".into(),
            cand_dtype: "f32".into(),
            shape_matches: true,
            rel_l2: Some(1e-7),
            cand_low_bits_zero: Some(0.0),
            ref_low_bits_zero: Some(0.0),
            ..CheckFacts::default()
        }
    }

    fn shape(base: f64, cand: f64) -> ShapeFacts {
        ShapeFacts {
            shape: "(4096, 4096)".into(),
            baseline: side("ref", base, 1),
            candidate: side("fast", cand, 2),
            checks: (0..5).map(good_check).collect(),
            ..ShapeFacts::default()
        }
    }

    fn facts(shapes: Vec<ShapeFacts>) -> GateFacts {
        GateFacts {
            device: Some("NVIDIA H100 80GB HBM3".into()),
            l2_bytes: Some(50e6),
            empty_window_s: Some(10e-6),
            shapes,
            ..GateFacts::default()
        }
    }

    fn h100() -> Peaks {
        kopt_model::datasheet_peaks("NVIDIA H100 80GB HBM3")
            .unwrap()
            .1
    }

    fn run(s: ShapeFacts) -> GateReport {
        judge(&facts(vec![s]), &GateSettings::default(), &h100()).unwrap()
    }

    fn reasons(r: &GateReport) -> Vec<SuspectReason> {
        r.shapes[0].suspect.iter().map(|s| s.reason).collect()
    }

    fn assert_suspect(r: &GateReport, reason: SuspectReason) {
        assert_eq!(r.verdict, VerdictKind::Suspect, "{r:#?}");
        assert!(reasons(r).contains(&reason), "{:?}", reasons(r));
        let v = r.shapes[0].warm.variants[1].verdict.as_ref().unwrap();
        assert_eq!(v.kind, VerdictKind::Suspect);
        assert!(v.reason.contains(reason.as_str()), "{}", v.reason);
    }

    #[test]
    fn honest_faster_keeps_honest_slower_reverts() {
        let r = run(shape(1e-3, 0.8e-3));
        assert_eq!(r.verdict, VerdictKind::Keep, "{r:#?}");
        assert!(r.shapes[0].suspect.is_empty());
        assert_eq!(r.shapes[0].warm.variants[1].correct, Some(true));
        let r = run(shape(1e-3, 1.2e-3));
        assert_eq!(r.verdict, VerdictKind::Revert);
        let r = run(shape(1e-3, 1.001e-3));
        assert_eq!(r.verdict, VerdictKind::Marginal);
    }

    #[test]
    fn a_wrong_answer_reverts_without_a_named_reason() {
        let mut s = shape(1e-3, 0.5e-3);
        for c in &mut s.checks {
            c.rel_l2 = Some(0.5);
        }
        let r = run(s);
        assert_eq!(r.verdict, VerdictKind::Revert);
        assert!(r.shapes[0].suspect.is_empty());
    }

    #[test]
    fn cached_output() {
        let mut s = shape(1e-3, 0.1e-3);
        for c in s.checks.iter_mut().skip(1) {
            c.rel_l2 = Some(1.4);
            c.repeats_call = Some(0);
        }
        assert_suspect(&run(s), SuspectReason::CachedOutput);
    }

    #[test]
    fn problems_are_capped_with_a_count() {
        let mut s = shape(1e-3, 0.5e-3);
        s.checks = (0..40).map(good_check).collect();
        for c in &mut s.checks {
            c.rel_l2 = Some(0.5);
        }
        let r = run(s);
        let p = &r.shapes[0].warm.variants[1].check_problems;
        assert_eq!(p.len(), 6, "{p:?}");
        assert_eq!(p[5], "... and 35 more like these");
    }

    #[test]
    fn inconsistent_output() {
        let mut s = shape(1e-3, 0.5e-3);
        s.checks[3].rel_l2 = Some(0.3);
        assert_suspect(&run(s), SuspectReason::InconsistentOutput);
    }

    #[test]
    fn partial_output() {
        let mut s = shape(1e-3, 0.5e-3);
        for c in &mut s.checks {
            c.poison_left = 1024;
        }
        assert_suspect(&run(s), SuspectReason::PartialOutput);
    }

    #[test]
    fn aliases_input_unless_the_reference_does_too() {
        let mut s = shape(1e-3, 0.5e-3);
        s.checks[2].aliases_input = true;
        assert_suspect(&run(s.clone()), SuspectReason::AliasesInput);
        for c in &mut s.checks {
            c.aliases_input = true;
            c.ref_aliases_input = true;
        }
        assert_eq!(run(s).verdict, VerdictKind::Keep);
    }

    #[test]
    fn lower_precision_against_the_float64_run_whatever_the_speed() {
        // #37: an fp8 round trip (6% error, slower) and bf16 work in fp32
        // clothing (4e-3) are SUSPECT by their error against the baseline
        // run in float64, many times the baseline's own.
        for (cand_err, fast) in [(0.06, false), (4e-3, true)] {
            let mut s = if fast {
                shape(1e-3, 0.5e-3)
            } else {
                shape(1e-3, 1.5e-3)
            };
            for c in &mut s.checks {
                c.wide_ref_err = Some(1e-7);
                c.wide_cand_err = Some(cand_err);
            }
            let r = run(s);
            assert_suspect(&r, SuspectReason::LowerPrecision);
        }
        // A reordered fp32 reduction: a few times the baseline's error,
        // under the floor of 16 unit roundoffs: no suspicion.
        let mut s = shape(1e-3, 0.5e-3);
        for c in &mut s.checks {
            c.wide_ref_err = Some(1e-7);
            c.wide_cand_err = Some(4e-7);
        }
        assert_eq!(run(s).verdict, VerdictKind::Keep);
        // A baseline that is itself imprecise (TF32 convolutions): a
        // candidate as imprecise is not suspect.
        let mut s = shape(1e-3, 0.5e-3);
        for c in &mut s.checks {
            c.wide_ref_err = Some(1e-3);
            c.wide_cand_err = Some(2e-3);
        }
        assert_eq!(run(s).verdict, VerdictKind::Keep);
    }

    #[test]
    fn lower_precision_by_dtype_bits_or_error() {
        let mut s = shape(1e-3, 0.5e-3);
        s.checks[0].cand_dtype = "bf16".into();
        assert_suspect(&run(s), SuspectReason::LowerPrecision);
        let mut s = shape(1e-3, 0.5e-3);
        for c in &mut s.checks {
            c.cand_low_bits_zero = Some(1.0);
        }
        assert_suspect(&run(s), SuspectReason::LowerPrecision);
        let mut s = shape(1e-3, 0.5e-3);
        for c in &mut s.checks {
            c.rel_l2 = Some(3e-3);
        }
        assert_suspect(&run(s.clone()), SuspectReason::LowerPrecision);
        // With the caller's own tolerance the error is just an error.
        let settings = GateSettings {
            tol: Some(1e-4),
            ..GateSettings::default()
        };
        let r = judge(&facts(vec![s]), &settings, &h100()).unwrap();
        assert_eq!(r.verdict, VerdictKind::Revert);
    }

    #[test]
    fn side_stream_by_timing_by_stale_output_and_by_tracer() {
        let mut s = shape(1e-3, 0.5e-3);
        // The caller's stream is done after 5 us; the device after 500.
        s.candidate.stream_s = vec![5e-6; 40];
        assert_suspect(&run(s), SuspectReason::SideStream);
        let mut s = shape(1e-3, 0.5e-3);
        s.checks[1].stale_on_stream = true;
        assert_suspect(&run(s), SuspectReason::SideStream);
        let mut s = shape(1e-3, 0.5e-3);
        s.candidate.outside_window = Some(vec![0, 1, 0]);
        assert_suspect(&run(s), SuspectReason::SideStream);
        // A side stream the caller's stream waits for is honest.
        let mut s = shape(1e-3, 0.5e-3);
        s.candidate.outside_window = Some(vec![0; 40]);
        assert_eq!(run(s).verdict, VerdictKind::Keep);
    }

    #[test]
    fn no_kernel_by_floor_and_by_tracer() {
        let s = shape(1e-3, 9e-6);
        assert_suspect(&run(s), SuspectReason::NoKernel);
        let mut s = shape(1e-3, 0.5e-3);
        s.candidate.kernels = Some(vec![0; 40]);
        assert_suspect(&run(s), SuspectReason::NoKernel);
        // A tiny honest kernel against a tiny baseline is not "no kernel".
        let s = shape(11e-6, 10.5e-6);
        assert!(!reasons(&run(s)).contains(&SuspectReason::NoKernel));
        // With a one-kernel window beside the empty one: the midpoint decides.
        let mut f = facts(vec![shape(1e-3, 14e-6)]);
        f.empty_window_s = Some(12e-6);
        f.kernel_window_s = Some(18e-6);
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert!(reasons(&r).contains(&SuspectReason::NoKernel));
        f.shapes = vec![shape(1e-3, 16e-6)];
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert!(!reasons(&r).contains(&SuspectReason::NoKernel));
    }

    #[test]
    fn timing_disagrees() {
        // A replaced elapsed_time: events say 10 us, the host waited 1 ms.
        let mut s = shape(1e-3, 1e-3);
        s.candidate.event_s = times(50e-6, 40, 5);
        s.candidate.stream_s = s.candidate.event_s.iter().map(|t| t - 8e-6).collect();
        s.candidate.wall_s = times(1.02e-3, 40, 6);
        assert_suspect(&run(s), SuspectReason::TimingDisagrees);
        // Events longer than the host window around them.
        let mut s = shape(1e-3, 0.5e-3);
        s.candidate.wall_s = times(0.2e-3, 40, 7);
        assert_suspect(&run(s), SuspectReason::TimingDisagrees);
        // The tracer's kernels take longer than the window.
        let mut s = shape(1e-3, 0.5e-3);
        s.candidate.kernel_s = Some(times(0.9e-3, 40, 8));
        assert_suspect(&run(s), SuspectReason::TimingDisagrees);
    }

    #[test]
    fn above_peak_bandwidth_and_flops() {
        // 1 GB in 0.1 ms = 10 TB/s: above H100's 3.35 TB/s DRAM (1 GB cannot sit in L2).
        let mut s = shape(1e-3, 0.1e-3);
        s.bytes = Some(1e9);
        assert_suspect(&run(s), SuspectReason::AbovePeak);
        // 20 MB fits in L2: 200 GB/s-ish warm rates are fine.
        let mut s = shape(1e-3, 0.5e-3);
        s.bytes = Some(20e6);
        assert_eq!(run(s).verdict, VerdictKind::Keep);
        // 1 PFLOP in 0.1 ms.
        let mut s = shape(1e-3, 0.1e-3);
        s.flops = Some(0.5e12);
        assert_suspect(&run(s), SuspectReason::AbovePeak);
        // The baseline above peak too: the caller's figure is wrong, not the candidate.
        let mut s = shape(0.11e-3, 0.1e-3);
        s.flops = Some(0.5e12);
        assert!(!reasons(&run(s)).contains(&SuspectReason::AbovePeak));
    }

    #[test]
    fn l2_flattered_and_flushed_reported_beside_warm() {
        let mut s = shape(1e-3, 0.8e-3);
        s.baseline.flushed_s = times(1.5e-3, 40, 9);
        s.candidate.flushed_s = times(1.5e-3, 40, 10);
        let r = run(s);
        assert_suspect(&r, SuspectReason::L2Flattered);
        assert!(r.shapes[0].flushed.is_some());
        let mut s = shape(1e-3, 0.8e-3);
        s.baseline.flushed_s = times(1.5e-3, 40, 9);
        s.candidate.flushed_s = times(1.2e-3, 40, 10);
        let r = run(s);
        assert_eq!(r.verdict, VerdictKind::Keep);
        assert_eq!(
            r.shapes[0].flushed.as_ref().unwrap().verdict,
            VerdictKind::Keep
        );
    }

    #[test]
    fn the_windows_own_cost_comes_off_both_sides() {
        let mut s = shape(100e-6, 96e-6);
        for f in [&mut s.baseline, &mut s.candidate] {
            f.stream_s = f.event_s.iter().map(|t| t - 40e-6).collect();
            f.wall_s = f.event_s.iter().map(|t| t + 5e-6).collect();
        }
        let mut f = facts(vec![s.clone()]);
        f.empty_window_s = Some(50e-6);
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert_eq!(r.verdict, VerdictKind::Keep, "{r:#?}");
        assert!(r.shapes[0].warm.variants[0].source.contains("40.0 us"));
        // Without a floor nothing comes off: 4% is not past the threshold.
        f.empty_window_s = None;
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert_eq!(r.verdict, VerdictKind::Marginal);
    }

    fn kernel(corr: u64, s: i64, e: i64) -> kopt_model::GpuActivity {
        kopt_model::GpuActivity {
            kind: kopt_model::ActivityKind::Kernel,
            name: "k".into(),
            start_ns: s,
            end_ns: e,
            device: 0,
            stream: 7,
            correlation: corr,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        }
    }

    fn launch(corr: u64, t: i64) -> kopt_model::ApiCall {
        kopt_model::ApiCall {
            kind: kopt_model::ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: t,
            end_ns: t + 1_000,
            thread: 1,
            correlation: corr,
            frame: None,
            op: None,
            op_span: None,
        }
    }

    fn mark(name: &str, s: i64, e: i64) -> kopt_model::Range {
        kopt_model::Range {
            name: name.into(),
            start_ns: s,
            end_ns: e,
            thread: None,
        }
    }

    /// Fake kernel records: three timed calls a side, 1 ms apart.
    fn timeline(candidate_kernels: bool, stray: bool) -> kopt_model::Timeline {
        let mut t = kopt_model::Timeline::default();
        let mut corr = 0;
        for n in 0..3i64 {
            for (k, side) in ["baseline", "candidate"].iter().enumerate() {
                let s = 1_000_000 * (2 * n + k as i64);
                t.ranges.push(mark(
                    &format!("kopt.gate/0/warm/{side}/{n}"),
                    s,
                    s + 500_000,
                ));
                if *side == "baseline" || candidate_kernels {
                    corr += 1;
                    t.api_calls.push(launch(corr, s + 10_000));
                    t.activities.push(kernel(corr, s + 20_000, s + 300_000));
                }
            }
        }
        if stray {
            // Launched between calls, run inside the baseline's second window.
            corr += 1;
            t.api_calls.push(launch(corr, 1_700_000));
            t.activities.push(kernel(corr, 2_100_000, 2_400_000));
        }
        t
    }

    #[test]
    fn tracer_facts_from_fake_kernel_records() {
        let mut s = shape(300e-6, 300e-6);
        for f in [&mut s.baseline, &mut s.candidate] {
            f.event_s.truncate(3);
            f.stream_s.truncate(3);
            f.wall_s.truncate(3);
        }
        let mut f = facts(vec![s.clone()]);
        assert_eq!(add_tracer_facts(&mut f, &timeline(true, false)), 6);
        let c = &f.shapes[0].candidate;
        assert_eq!(c.kernels, Some(vec![1, 1, 1]));
        assert!((c.kernel_s.as_ref().unwrap()[0] - 280e-6).abs() < 1e-9);
        assert_eq!(c.outside_window, Some(vec![0, 0, 0]));
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert!(r.shapes[0].suspect.is_empty(), "{:?}", r.shapes[0].suspect);
        // The candidate launched nothing.
        let mut f = facts(vec![s.clone()]);
        add_tracer_facts(&mut f, &timeline(false, false));
        assert_eq!(f.shapes[0].candidate.kernels, Some(vec![0, 0, 0]));
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert!(reasons(&r).contains(&SuspectReason::NoKernel));
        // Work launched outside every timed call ran inside the baseline's.
        let mut f = facts(vec![s]);
        add_tracer_facts(&mut f, &timeline(true, true));
        assert_eq!(f.shapes[0].candidate.outside_window, Some(vec![0, 0, 0, 1]));
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert!(reasons(&r).contains(&SuspectReason::SideStream));
        // A trace without the harness's marks adds nothing.
        let mut f = facts(vec![shape(1e-3, 1e-3)]);
        assert_eq!(
            add_tracer_facts(&mut f, &kopt_model::Timeline::default()),
            0
        );
        assert!(f.shapes[0].candidate.kernels.is_none());
    }

    #[test]
    fn harness_tampered() {
        let mut s = shape(1e-3, 0.5e-3);
        s.tampered = vec!["torch.cuda.synchronize".into()];
        assert_suspect(&run(s), SuspectReason::HarnessTampered);
    }

    #[test]
    fn per_shape_and_overall() {
        let fast = shape(1e-3, 0.8e-3);
        let mut slow = shape(1e-3, 1.2e-3);
        slow.shape = "(1, 4096)".into();
        let r = judge(&facts(vec![fast, slow]), &GateSettings::default(), &h100()).unwrap();
        assert_eq!(r.shapes[0].verdict, VerdictKind::Keep);
        assert_eq!(r.shapes[1].verdict, VerdictKind::Revert);
        assert_eq!(r.verdict, VerdictKind::Revert);
    }

    #[test]
    fn every_reason_is_covered_and_never_keeps() {
        // Each reason above has its test; this one checks the names stay unique.
        let mut names: Vec<&str> = SuspectReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SuspectReason::ALL.len());
        assert!(VerdictKind::Suspect.worst(VerdictKind::Keep) == VerdictKind::Suspect);
        assert!(VerdictKind::Revert.worst(VerdictKind::Suspect) == VerdictKind::Suspect);
    }

    #[test]
    fn clear_errors_on_thin_facts() {
        let e = judge(&facts(vec![]), &GateSettings::default(), &h100()).unwrap_err();
        assert!(e.contains("no shape"), "{e}");
        let mut s = shape(1e-3, 1e-3);
        s.candidate.event_s.truncate(2);
        let e = judge(&facts(vec![s]), &GateSettings::default(), &h100()).unwrap_err();
        assert!(e.contains("at least 3"), "{e}");
        let mut s = shape(1e-3, 1e-3);
        s.baseline.event_s[0] = f64::NAN;
        assert!(judge(&facts(vec![s]), &GateSettings::default(), &h100()).is_err());
    }

    #[test]
    fn facts_read_from_the_harness_json() {
        let f: GateFacts = serde_json::from_str(
            r#"{"device":"NVIDIA H100 80GB HBM3","shapes":[{"shape":"a",
            "baseline":{"name":"ref","event_s":[1,1,1,1]},
            "candidate":{"name":"c","event_s":[0.5,0.5,0.5,0.5]},
            "checks":[{"call":0,"ref_dtype":"f32","cand_dtype":"f32","shape_matches":true,"rel_l2":0.0}]}]}"#,
        )
        .unwrap();
        let r = judge(&f, &GateSettings::default(), &h100()).unwrap();
        assert_eq!(r.verdict, VerdictKind::Keep);
    }
}
