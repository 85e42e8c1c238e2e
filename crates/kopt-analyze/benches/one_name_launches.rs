//! The timeline summary's time against the number of launches when every
//! launch is of one kernel name (issue 38: it was quadratic, 100k launches
//! 7 s, 200k 30 s, 1M killed at 60 s). Linear means the 1M / 100k ratio is
//! about 10.
//!
//!     cargo bench -p kopt-analyze --bench one_name_launches
//!     cargo bench -p kopt-analyze --bench one_name_launches -- 100000 1000000

use std::time::Instant;

use kopt_analyze::{analyze, timeline, AnalyzeOptions};
use kopt_model::{ActivityKind, ApiCall, ApiKind, GpuActivity, Timeline};

/// `n` launches of one kernel, 10 us apart: a 4 us launch call, the kernel
/// running 2 us from 5 us after the call's start; with `synced`, a 1 us
/// stream synchronisation after each kernel (steps marked by the host).
fn one_name(n: usize, synced: bool) -> Timeline {
    let mut t = Timeline::default();
    for i in 0..n {
        let at = 1_000_000 + i as i64 * 10_000;
        let c = i as u64 + 1;
        t.api_calls.push(ApiCall {
            kind: ApiKind::KernelLaunch,
            name: "cudaLaunchKernel".into(),
            start_ns: at,
            end_ns: at + 4_000,
            thread: 1,
            correlation: c,
            frame: None,
            op: None,
            op_span: None,
        });
        t.activities.push(GpuActivity {
            kind: ActivityKind::Kernel,
            name: "void elementwise_kernel<float>(float*, int)".into(),
            start_ns: at + 5_000,
            end_ns: at + 7_000,
            device: 0,
            stream: 7,
            correlation: c,
            grid: None,
            block: None,
            bytes: None,
            copy: None,
        });
        if synced {
            t.api_calls.push(ApiCall {
                kind: ApiKind::Synchronize,
                name: "cudaStreamSynchronize".into(),
                start_ns: at + 7_500,
                end_ns: at + 8_500,
                thread: 1,
                correlation: 0,
                frame: None,
                op: None,
                op_span: None,
            });
        }
    }
    t
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![100_000, 200_000, 1_000_000]
    } else {
        sizes
    };
    for (shape, synced) in [("evenly spaced", false), ("a sync after each", true)] {
        run(&sizes, shape, synced);
    }
}

/// Times the summary and the whole analysis at each size, and prints the
/// ratio of the largest to the smallest.
fn run(sizes: &[usize], shape: &str, synced: bool) {
    let mut summary_s = Vec::new();
    for &n in sizes {
        let t = one_name(n, synced);
        let clock = Instant::now();
        let s = timeline::summarize(&t).expect("a summary");
        let summarized = clock.elapsed().as_secs_f64();
        let profile = kopt_ingest::profile_from_timeline(t, "bench", "synthetic");
        let clock = Instant::now();
        let d = analyze(&profile, &AnalyzeOptions::default());
        let analysed = clock.elapsed().as_secs_f64();
        println!(
            "{n:>9} launches of one name, {shape}: summary {summarized:.3} s, whole analysis {analysed:.3} s \
             (steps {:?}, kernels {}, {} recommendations)",
            s.iterations,
            s.kernels,
            d.recommendations.len()
        );
        summary_s.push((n, summarized, analysed));
    }
    if let (Some(first), Some(last)) = (summary_s.first(), summary_s.last()) {
        if last.0 > first.0 {
            println!(
                "{shape}: {}/{} launches: summary x{:.1}, whole analysis x{:.1} (linear: x{:.0})",
                last.0,
                first.0,
                last.1 / first.1,
                last.2 / first.2,
                last.0 as f64 / first.0 as f64
            );
        }
    }
}
