//! Synthetic timelines the unit tests build on.

use kopt_model::{ActivityKind, ApiCall, ApiKind, GpuActivity, Timeline};

pub(crate) fn kernel(start: i64, dur: i64, corr: u64) -> GpuActivity {
    GpuActivity {
        kind: ActivityKind::Kernel,
        name: format!("k{corr}"),
        start_ns: start,
        end_ns: start + dur,
        device: 0,
        stream: 7,
        correlation: corr,
        grid: None,
        block: None,
        bytes: None,
        copy: None,
    }
}

pub(crate) fn launch(start: i64, dur: i64, corr: u64) -> ApiCall {
    ApiCall {
        kind: ApiKind::KernelLaunch,
        name: "cudaLaunchKernel".into(),
        start_ns: start,
        end_ns: start + dur,
        thread: 1,
        correlation: corr,
        frame: None,
        op: None,
        op_span: None,
    }
}

/// A program without ranges: `warmup` steps (one trial kernel more each,
/// as cuDNN's benchmark search), then `steps` forward passes of
/// `layers` identical 4-kernel layers and a head kernel; the model syncs
/// after every `sync_every` layers (its own `.item()`), the loop copies
/// the result back and syncs after each step, then the host pauses
/// `loop_ns` before the next.
pub(super) fn forward_passes(
    warmup: usize,
    steps: usize,
    layers: usize,
    sync_every: usize,
    loop_ns: i64,
) -> Timeline {
    let mut t = Timeline::default();
    let mut c = 1u64;
    let mut at = 1_000_000i64;
    let sync = |t: &mut Timeline, at: &mut i64| {
        t.api_calls.push(ApiCall {
            kind: ApiKind::Synchronize,
            name: "cudaStreamSynchronize".into(),
            start_ns: *at,
            end_ns: *at + 2_000,
            thread: 1,
            correlation: 0,
            frame: None,
            op: None,
            op_span: None,
        });
        *at += 3_000;
    };
    for step in 0..warmup + steps {
        let mut push = |t: &mut Timeline, at: &mut i64, name: String| {
            t.api_calls.push(launch(*at, 4_000, c));
            let mut k = kernel(*at + 5_000, 2_000, c);
            k.name = name;
            t.activities.push(k);
            c += 1;
            *at += 5_000;
        };
        if step < warmup {
            push(&mut t, &mut at, "trial_algo".into());
        }
        for layer in 0..layers {
            for k in 0..4 {
                push(&mut t, &mut at, format!("layer_op_{k}"));
            }
            if sync_every > 0 && (layer + 1) % sync_every == 0 {
                sync(&mut t, &mut at);
            }
        }
        push(&mut t, &mut at, "head".into());
        sync(&mut t, &mut at);
        at += loop_ns;
    }
    t
}
