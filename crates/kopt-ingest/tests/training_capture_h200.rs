//! Training steps captured on an H200 (fixtures/training-capture-h200, its
//! check.sh): kopt's tracer records each copy's memory kinds and the
//! training driver's phase ranges; torch.profiler's trace of a user loop
//! under `kopt.profile_steps` carries the same phase names.

use std::path::PathBuf;

use kopt_model::{ActivityKind, CopyDirection as D, MemoryKind as M};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/training-capture-h200")
        .join(name)
}

fn copies(t: &kopt_model::Timeline) -> Vec<(D, M, M)> {
    t.activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Memcpy)
        .map(|a| {
            let c = a.copy.expect("every tracer copy has a kind");
            (c.direction, c.src, c.dst)
        })
        .collect()
}

fn ranges(t: &kopt_model::Timeline, name: &str) -> usize {
    t.ranges.iter().filter(|r| r.name == name).count()
}

#[test]
fn a_pageable_batch_per_step_reads_as_pageable_host_to_device() {
    let t = kopt_ingest::read_kopt_trace(&fixture("train_mlp.trace.jsonl.gz"))
        .unwrap()
        .timeline;
    let c = copies(&t);
    // 3 warm-up + 20 steps, each copying a batch and its labels (and the
    // first batch of get_inputs at set-up): all from pageable memory.
    assert_eq!(c.len(), 54);
    assert!(c
        .iter()
        .all(|&k| k == (D::HostToDevice, M::Pageable, M::Device)));
    for phase in [
        "kopt_step",
        "kopt:data",
        "kopt:forward",
        "kopt:backward",
        "kopt:optimizer",
    ] {
        assert_eq!(ranges(&t, phase), 23, "{phase}");
    }
}

#[test]
fn a_pinned_input_and_item_syncs_read_with_their_memory_kinds() {
    let t = kopt_ingest::read_kopt_trace(&fixture("train_sync.trace.jsonl.gz"))
        .unwrap()
        .timeline;
    let c = copies(&t);
    let count = |k: (D, M, M)| c.iter().filter(|&&x| x == k).count();
    // The pinned non-blocking input copy, and loss.item()'s copy back, once a step.
    assert_eq!(count((D::HostToDevice, M::Pinned, M::Device)), 23);
    assert_eq!(count((D::DeviceToHost, M::Device, M::Pinned)), 23);
    assert!(count((D::DeviceToDevice, M::Device, M::Device)) > 0);
    // train_step form: the optimizer's step hooks mark it, nothing else.
    assert_eq!(ranges(&t, "kopt:optimizer"), 23);
    assert_eq!(ranges(&t, "kopt:forward"), 0);
}

#[test]
fn profile_steps_phases_are_in_the_kineto_trace() {
    let k = kopt_ingest::read_kineto(&fixture("loop.pt.trace.json.gz")).unwrap();
    let t = &k.timeline;
    // wait 1, warmup 1, active 3: the active steps are in the trace, each
    // phase once a step (the CPU range; its GPU copy is not a second one).
    assert_eq!(
        t.ranges
            .iter()
            .filter(|r| r.name.starts_with("ProfilerStep#"))
            .count(),
        3
    );
    for phase in [
        "kopt:data",
        "kopt:forward",
        "kopt:backward",
        "kopt:optimizer",
    ] {
        assert_eq!(ranges(t, phase), 3, "{phase}");
    }
    // Its per-step x.cuda() is a pageable copy, named so by Kineto.
    assert!(copies(t).contains(&(D::HostToDevice, M::Pageable, M::Device)));
}
