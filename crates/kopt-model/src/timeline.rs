//! A timeline: what ran on the GPU and what the CPU called to make it run,
//! in integer nanoseconds (from a Kineto / torch.profiler trace or kopt's tracer).

use serde::{Deserialize, Serialize};

use crate::Dim3;

/// What kind of GPU activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActivityKind {
    Kernel,
    Memcpy,
    Memset,
}

/// One interval of GPU work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GpuActivity {
    pub kind: ActivityKind,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub device: u32,
    pub stream: u64,
    /// Links the activity to the API call that launched it.
    pub correlation: u64,
    pub grid: Option<Dim3>,
    pub block: Option<Dim3>,
    pub bytes: Option<u64>,
    /// A copy's direction and the kinds of memory on each side (pageable
    /// host memory makes the copy synchronous and slow); None for kernels,
    /// memsets and copies whose kinds the recorder did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyKind>,
}

/// Which way a copy went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CopyDirection {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    HostToHost,
    PeerToPeer,
    Unknown,
}

/// The kind of memory on one side of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// Ordinary (pageable) host memory: the driver stages it, the copy
    /// cannot overlap and blocks the host.
    Pageable,
    /// Page-locked host memory (`pin_memory()`, `cudaHostAlloc`).
    Pinned,
    Device,
    Managed,
    Unknown,
}

/// A copy's direction and the memory kinds of its source and destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CopyKind {
    pub direction: CopyDirection,
    pub src: MemoryKind,
    pub dst: MemoryKind,
}

impl GpuActivity {
    pub fn duration_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }
}

/// What a host API call did, as far as the timeline analysis cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    /// cudaLaunchKernel, cuLaunchKernel(Ex), cudaLaunchCooperativeKernel, ...
    KernelLaunch,
    /// cudaGraphLaunch / cuGraphLaunch.
    GraphLaunch,
    /// cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, ...
    Synchronize,
    /// cudaMemcpy*, cudaMemset*.
    Memory,
    Other,
}

impl ApiKind {
    pub fn of(name: &str) -> ApiKind {
        // Called for every API event of a trace (millions): lower-cased on
        // the stack and searched with prebuilt finders, no allocation.
        use memchr::memmem::Finder;
        use std::sync::LazyLock;
        static FINDERS: LazyLock<[Finder<'static>; 6]> = LazyLock::new(|| {
            [
                "graphlaunch",
                "launchkernel",
                "launchcooperativekernel",
                "synchronize",
                "memcpy",
                "memset",
            ]
            .map(Finder::new)
        });
        let mut buf = [0u8; 128];
        let lower: std::borrow::Cow<[u8]> = if name.len() <= buf.len() {
            let b = &mut buf[..name.len()];
            b.copy_from_slice(name.as_bytes());
            b.make_ascii_lowercase();
            std::borrow::Cow::Borrowed(b)
        } else {
            std::borrow::Cow::Owned(name.to_ascii_lowercase().into_bytes())
        };
        let has = |i: usize| FINDERS[i].find(&lower).is_some();
        if has(0) {
            ApiKind::GraphLaunch
        } else if has(1) || has(2) || &*lower == b"culaunchgrid" {
            ApiKind::KernelLaunch
        } else if has(3) {
            ApiKind::Synchronize
        } else if has(4) || has(5) {
            ApiKind::Memory
        } else {
            ApiKind::Other
        }
    }
}

/// One host-side CUDA API call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ApiCall {
    pub kind: ApiKind,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub thread: u64,
    pub correlation: u64,
    /// The user's Python source line that made the call
    /// (`path/file.py:LINE in function`), where the recorder saw the Python
    /// stack; None otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
    /// The framework op the call was made in (`aten::item`,
    /// `aten::nonzero`, ...), where the recorder saw op events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// That op's host span (start, end), ns: what the host spends in it,
    /// its own work and its wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_span: Option<(i64, i64)>,
}

/// A user annotation (torch `ProfilerStep#N`, NVTX range).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Range {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The host thread that opened it, where the trace says: steps are
    /// taken from one thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u64>,
}

/// What recorded a timeline: the recorder's own cost per launch is taken
/// out of the eager time a prediction starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Recorder {
    #[default]
    Unknown,
    /// kopt's CUPTI tracer (`kopt trace`, `kopt profile`'s timing pass).
    KoptTracer,
    /// torch.profiler / Kineto.
    Kineto,
}

/// Host time kopt's tracer adds to a PyTorch step, per kernel launch, ns,
/// used only when there was no bare run (the steps timed untraced,
/// `Timeline::bare_steps`: marked steps by their ranges, others by their
/// sync calls) to measure it. Measured, traced step vs the same step bare,
/// on launch-bound steps only (a GPU-bound step hides the cost): on two
/// H200s 4.8 (MoE routing), 6.4 (MLP) and 19.8 us (decode) in one session
/// (2026-11-26 morning, fixtures/predictions-h200), 7.5, 2.4 and 1.7 us in
/// another (fixtures/predictions-h200-bare); on an H100 (plain loops, no
/// NVTX, traced step against measure.py's bare eager step,
/// fixtures/advice-h100 of 2026-11-26, since replaced) 12.7 (ResNet-50 b1), 7.8 (LSTMCell b16) and 0.6
/// us (BERT b1, whose step is the interpreter's, 575 us of 4.3 ms busy).
/// The median of the nine, 6.4 us (`Recorder::overhead_band` gives the
/// range). The cost follows the framework's runtime calls (a decode step
/// makes 1,133 a step, 670 of them cudaGetDevice) and the machine, not the
/// launches: no constant fits all, which is why the bare run measures it.
pub const KOPT_TRACER_NS_PER_LAUNCH: f64 = 6_400.0;
/// The same for torch.profiler (Kineto), ns: no longer the model (see
/// `KINETO_SLOWDOWN`), kept as the typical figure. Measured: 8 to 52 us a
/// launch across H200s and H100s, 2026-11-26.
pub const KINETO_NS_PER_LAUNCH: f64 = 12_000.0;
/// How much torch.profiler (CPU + CUDA activities) slows a launch-bound
/// PyTorch step: the traced step over the same step bare. Its cost is not a
/// per-launch constant (8 to 52 us a launch, 2.4 to 7.3 us an op, over the
/// same captures) but grows with the step's own host work, every op and
/// runtime call taxed. Measured over 22 captures of eight workloads on H200
/// and H100 machines (fixtures/seed000-h200, predictions-h200, -h200-bare,
/// -h100-bare, -h100-profiler, -h100-profiler-2): 1.17 to 4.4x, geometric
/// mean 2.1 (the band's low end, 1.15, is under the 1.17 seen). At 2.1, 19 of the 22 bare eager times are within 1.4x. Outside:
/// seed 000's MoE step (x1.17-1.40: a synchronised step, whose GPU tail the
/// profiler does not slow), a morning when both recorders ran twice as slow
/// on the decode step (x3.75), and one call where the profiler slowed the
/// MoE step x4.4 (x2.4 an hour before). A fourth set, after the fit
/// (predictions-h100-profiler-4, a noisier hour), ran x1.57 to x3.67. A
/// trace alone cannot do better;
/// `kopt analyze TRACE -- PROGRAM` times the program bare.
pub const KINETO_SLOWDOWN: f64 = 2.1;
/// The slowdowns measured (lowest, highest): the prediction's range.
pub const KINETO_SLOWDOWN_BAND: (f64, f64) = (1.15, 4.4);
/// The most torch.profiler was seen to cost a launch, ns, rounded up (52 us:
/// a transformer encoder step on a noisy H100, fixtures/
/// predictions-h100-profiler-4; 41 us on an H200's decode step): the
/// slowdown never takes more than this out, so host time the profiler does
/// not record (Python work between steps, data loading) is not taken for
/// its cost.
pub const KINETO_MAX_NS_PER_LAUNCH: f64 = 60_000.0;
/// Host time one framework op range costs when PyTorch records them
/// (`emit_nvtx(record_shapes=True)`, `kopt profile --ops`), ns, beyond the
/// recorder's per-launch cost. Measured once, on an H200 (2026-11-26,
/// fixtures/ops-gpt2-h200): GPT-2 prefill recorded 11.45 ms per step with
/// 1,087 op ranges, 10.33 ms less the tracer's launch cost, against 7.25 ms
/// bare: 2.8 us a range. One workload: the prediction's range gives it
/// x0.5-1.5.
pub const NVTX_OP_RANGE_NS: f64 = 2_800.0;

impl Recorder {
    /// The recorder's own host cost per kernel launch, ns.
    pub fn overhead_per_launch_ns(self) -> f64 {
        match self {
            Recorder::KoptTracer => KOPT_TRACER_NS_PER_LAUNCH,
            Recorder::Kineto => KINETO_NS_PER_LAUNCH,
            Recorder::Unknown => 0.0,
        }
    }

    /// How far the recorder's real per-launch cost strays from the constant
    /// (low, high multipliers), for the prediction's range, which is an
    /// interquartile range elsewhere too (the steps' 25th-75th
    /// percentiles): kopt's tracer's nine measured costs (0.6 to 19.8 us,
    /// see `KOPT_TRACER_NS_PER_LAUNCH`) have their 25th and 75th
    /// percentiles at 2.4 and 7.8 us, x0.375-1.22 of 6.4. (Their whole
    /// spread, x0.1-3.1, made every launch-bound step's range pass 3x, where
    /// the figure is dropped.) torch.profiler's prediction uses its
    /// slowdown instead (`slowdown`); its band here is the old per-launch one.
    pub fn overhead_band(self) -> (f64, f64) {
        match self {
            Recorder::KoptTracer => (0.375, 1.22),
            Recorder::Kineto => (0.3, 2.5),
            Recorder::Unknown => (1.0, 1.0),
        }
    }

    /// The slowdown model, for recorders whose cost grows with the step's
    /// host work rather than its launches: (factor, band).
    pub fn slowdown(self) -> Option<(f64, (f64, f64))> {
        match self {
            Recorder::Kineto => Some((KINETO_SLOWDOWN, KINETO_SLOWDOWN_BAND)),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Recorder::KoptTracer => "kopt's tracer",
            Recorder::Kineto => "torch.profiler",
            Recorder::Unknown => "the recorder",
        }
    }
}

/// Everything a trace holds that kopt uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Timeline {
    pub activities: Vec<GpuActivity>,
    pub api_calls: Vec<ApiCall>,
    pub ranges: Vec<Range>,
    /// The framework's own phase annotations (torch.optim's
    /// `Optimizer.step#Adam.step`, `Optimizer.zero_grad#...`), on the host:
    /// kept apart from `ranges`, which mark steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_ranges: Vec<Range>,
    /// Device name from the trace's metadata, if any.
    pub device_name: Option<String>,
    pub sm_count: Option<u32>,
    /// Compute capability `major.minor` from the trace's device record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// Global memory bandwidth the device record reports, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_bandwidth_bytes_per_s: Option<f64>,
    /// SM clock the device record reports, Hz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_hz: Option<f64>,
    /// What recorded the trace.
    #[serde(default)]
    pub recorder: Recorder,
    /// True when the trace covers the whole program (kopt's tracer), set-up
    /// and first step included; a torch.profiler trace covers what the user chose.
    pub whole_program: bool,
    /// A sampled trace's windows `(start_ns, end_ns)`, in order: the tracer
    /// recorded only inside them. Empty for a continuous trace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sampled_windows: Vec<(i64, i64)>,
    /// The steps of a second run of the workload without CUPTI (`kopt
    /// trace`'s bare run), where only the step range's NVTX calls were
    /// timed: the eager step time with no recorder cost in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bare_steps: Option<BareSteps>,
    /// Which rank of a distributed job recorded this timeline, when the
    /// trace says (one timeline is one rank: ranks are never merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<crate::RankInfo>,
    /// Every GPU the trace describes, (id, name): one process may run
    /// kernels on GPUs of different models, and `device_name` is only the
    /// busiest's (or the first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_names: Vec<(u32, String)>,
}

/// The `range` of a bare run of a program without step ranges: not an NVTX
/// range but the ends of the host's synchronising calls (device, stream and
/// event syncs, blocking copies), one span `(end, end)` each, timed with
/// CUPTI's callbacks for those calls only. The analysis matches them to the
/// traced run's sync calls to read the untraced step off them.
pub const BARE_SYNC_RANGE: &str = "kopt:host-sync";

/// The `range` of a bare run of a program that marks no steps and makes too
/// few synchronising calls to time them by: every `every`-th kernel launch
/// call (the step's launch count, so one mark a step) timed at its start,
/// with CUPTI's callbacks for the launch calls counting them and nothing
/// recorded. Each span is `(time, ordinal)`: the host time the launch call
/// began and its 0-based ordinal among the process's launch calls (graph
/// launches count one). `BARE_LAUNCH_RANGE_PREFIX` then `every`.
pub const BARE_LAUNCH_RANGE_PREFIX: &str = "kopt:launch-every-";

/// The range name of a launch-count bare run marking every `every` launches.
pub fn bare_launch_range(every: u64) -> String {
    format!("{BARE_LAUNCH_RANGE_PREFIX}{every}")
}

/// `every` of a launch-count bare run's range; None for any other range.
pub fn bare_launch_every(range: &str) -> Option<u64> {
    range
        .strip_prefix(BARE_LAUNCH_RANGE_PREFIX)?
        .parse()
        .ok()
        .filter(|n| *n > 0)
}

/// Step ranges timed in a bare run (no CUPTI): one NVTX range name, the
/// start and end of each range in run order (host clock, ns); or, with the
/// range `BARE_SYNC_RANGE`, the ends of the host's synchronising calls; or,
/// with a launch range (`bare_launch_range`), marked launch calls as
/// `(time, ordinal)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BareSteps {
    pub range: String,
    pub spans_ns: Vec<(i64, i64)>,
    /// Timed in the traced process itself, after the tracer detached
    /// (kopt's module driver), not in a second run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_process: bool,
}

impl BareSteps {
    /// The step periods (one start to the next) after the first `skip`, ns.
    pub fn periods_ns(&self, skip: usize) -> Vec<f64> {
        let mut starts: Vec<i64> = self.spans_ns.iter().map(|s| s.0).collect();
        starts.sort_unstable();
        starts
            .windows(2)
            .skip(skip)
            .map(|w| (w[1] - w[0]) as f64)
            .collect()
    }

    /// The mean step period after the first, ns: how two bare runs of one
    /// workload compare. None under two periods.
    pub fn mean_period_ns(&self) -> Option<f64> {
        let periods = self.periods_ns(1);
        (periods.len() >= 2).then(|| periods.iter().sum::<f64>() / periods.len() as f64)
    }
}

/// A range's name with a trailing step number cut: `ProfilerStep#12` -> `ProfilerStep`.
pub fn range_family(name: &str) -> &str {
    match name.rsplit_once('#') {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// The name of a Kineto trace's backward phase ranges: the union, per
/// thread, of the autograd engine's `evaluate_function` ops.
pub const BACKWARD_PHASE: &str = "autograd::engine (backward)";

impl Timeline {
    /// The trace with the time between sampled windows cut out, so what the
    /// tracer never saw does not read as idle GPU time. Each record moves
    /// with the window its start falls in; a window lasts until its end or
    /// until the last of its records ends (kernels launched in it may run
    /// later). A continuous trace is returned as it is.
    pub fn spliced(&self) -> std::borrow::Cow<'_, Timeline> {
        let w = &self.sampled_windows;
        if w.len() < 2 {
            return std::borrow::Cow::Borrowed(self);
        }
        let window_of = |t: i64| w.partition_point(|&(s, _)| s <= t).saturating_sub(1);
        let mut ends: Vec<i64> = w.iter().map(|&(_, e)| e).collect();
        let spans = self
            .activities
            .iter()
            .map(|a| (a.start_ns, a.end_ns))
            .chain(self.api_calls.iter().map(|c| (c.start_ns, c.end_ns)))
            .chain(self.ranges.iter().map(|r| (r.start_ns, r.end_ns)));
        for (s, e) in spans {
            let k = window_of(s);
            ends[k] = ends[k].max(e);
        }
        let mut shift = vec![0i64; w.len()];
        for k in 1..w.len() {
            shift[k] = shift[k - 1] + (w[k].0 - ends[k - 1]).max(0);
        }
        let moved = |s: i64| shift[window_of(s)];
        let mut t = self.clone();
        for a in &mut t.activities {
            let d = moved(a.start_ns);
            a.start_ns -= d;
            a.end_ns -= d;
        }
        for c in &mut t.api_calls {
            let d = moved(c.start_ns);
            c.start_ns -= d;
            c.end_ns -= d;
        }
        for r in &mut t.ranges {
            let d = moved(r.start_ns);
            r.start_ns -= d;
            r.end_ns -= d;
        }
        t.sampled_windows = w
            .iter()
            .zip(&ends)
            .zip(&shift)
            .map(|((&(s, _), &e), &d)| (s - d, e - d))
            .collect();
        std::borrow::Cow::Owned(t)
    }

    /// The ranges that mark iterations: those of the most repeated range
    /// family (`ProfilerStep#N`, or an NVTX name pushed once per step), or of
    /// `family` when given. Ties go to the family covering more time (the outer one).
    pub fn iteration_ranges(&self, family: Option<&str>) -> Vec<&Range> {
        let chosen = match family {
            Some(f) => f.to_string(),
            None => {
                let mut by: std::collections::HashMap<&str, (usize, i64)> =
                    std::collections::HashMap::new();
                for r in &self.ranges {
                    let e = by.entry(range_family(&r.name)).or_default();
                    e.0 += 1;
                    e.1 += r.end_ns - r.start_ns;
                }
                match by.into_iter().max_by_key(|(name, (n, t))| (*n, *t, *name)) {
                    Some((name, _)) => name.to_string(),
                    None => return Vec::new(),
                }
            }
        };
        self.ranges
            .iter()
            .filter(|r| range_family(&r.name) == chosen)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(name: &str, start_ns: i64, end_ns: i64) -> Range {
        Range {
            name: name.into(),
            start_ns,
            end_ns,
            thread: None,
        }
    }

    #[test]
    fn iterations_come_from_the_most_repeated_family() {
        let t = Timeline {
            ranges: vec![
                range("setup", 0, 50),
                range("step", 100, 200),
                range("attn", 110, 150),
                range("step", 200, 300),
                range("attn", 210, 250),
            ],
            ..Timeline::default()
        };
        let names: Vec<&str> = t
            .iteration_ranges(None)
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(names, vec!["step", "step"], "ties go to the outer range");
        assert_eq!(t.iteration_ranges(Some("attn")).len(), 2);
        assert!(t.iteration_ranges(Some("nope")).is_empty());
    }

    fn kernel(start_ns: i64, end_ns: i64) -> GpuActivity {
        GpuActivity {
            kind: ActivityKind::Kernel,
            name: "k".into(),
            start_ns,
            end_ns,
            device: 0,
            stream: 7,
            correlation: 1,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        }
    }

    #[test]
    fn splicing_cuts_the_time_between_sampled_windows() {
        let t = Timeline {
            // Windows 0-100 and 1000-1100; the first's last kernel ends at 120.
            sampled_windows: vec![(0, 100), (1000, 1100)],
            activities: vec![kernel(10, 50), kernel(90, 120), kernel(1010, 1050)],
            ranges: vec![range("step", 1005, 1090)],
            ..Timeline::default()
        };
        let s = t.spliced();
        let starts: Vec<(i64, i64)> = s
            .activities
            .iter()
            .map(|a| (a.start_ns, a.end_ns))
            .collect();
        assert_eq!(
            starts,
            vec![(10, 50), (90, 120), (130, 170)],
            "880 ns of untraced time cut"
        );
        assert_eq!((s.ranges[0].start_ns, s.ranges[0].end_ns), (125, 210));
        assert_eq!(s.sampled_windows, vec![(0, 120), (120, 220)]);
        let continuous = Timeline {
            activities: vec![kernel(10, 50)],
            ..Timeline::default()
        };
        assert!(matches!(
            continuous.spliced(),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn api_kinds_ignore_case() {
        assert_eq!(ApiKind::of("cudaLaunchKernel"), ApiKind::KernelLaunch);
        assert_eq!(bare_launch_every(&bare_launch_range(318)), Some(318));
        assert_eq!(bare_launch_every(BARE_SYNC_RANGE), None);
        assert_eq!(bare_launch_every("kopt:launch-every-0"), None);
        assert_eq!(bare_launch_every("kopt:launch-every-x"), None);
        assert_eq!(ApiKind::of("cuLaunchKernelEx"), ApiKind::KernelLaunch);
        assert_eq!(ApiKind::of("CULAUNCHGRID"), ApiKind::KernelLaunch);
        assert_eq!(ApiKind::of("cudaGraphLaunch_v10000"), ApiKind::GraphLaunch);
        assert_eq!(ApiKind::of("cudaStreamSynchronize"), ApiKind::Synchronize);
        assert_eq!(ApiKind::of("cudaMemcpyAsync"), ApiKind::Memory);
        assert_eq!(ApiKind::of("cudaGetDevice"), ApiKind::Other);
        assert_eq!(ApiKind::of(""), ApiKind::Other);
    }

    #[test]
    fn profiler_steps_form_one_family() {
        assert_eq!(range_family("ProfilerStep#12"), "ProfilerStep");
        assert_eq!(range_family("a#b"), "a#b");
        assert_eq!(range_family("plain"), "plain");
    }
}
