//! The traces other processes of a workload wrote beside a kopt trace
//! (`trace.jsonl.<pid>`): the activity budget holds as each is read, and a
//! file met twice is merged once (#39).

use std::path::Path;

/// A trace of process `pid` with `kernels` kernels from `t0` ns on.
fn trace(pid: u32, kernels: usize, t0: u64) -> String {
    let mut s = format!(
        "{{\"t\":\"process\",\"pid\":{pid},\"run\":\"r\"}}\n{{\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA H200\",\"sms\":132,\"cc\":[9,0]}}\n"
    );
    for i in 0..kernels as u64 {
        s += &format!(
            "{{\"t\":\"kernel\",\"name\":\"k{pid}\",\"s\":{},\"e\":{},\"dev\":0,\"str\":7,\"c\":{}}}\n",
            t0 + i * 100,
            t0 + i * 100 + 50,
            i + 1
        );
    }
    s + "{\"t\":\"end\",\"records\":1,\"dropped\":0}\n"
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// Siblings each under the budget but past it together are refused at the
/// first that passes it, before the next is read (round seven: twelve of
/// them were merged, 4.48 GB, before the count was checked).
#[test]
fn the_activity_budget_is_checked_as_each_sibling_is_read() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "trace.jsonl", &trace(1, 6, 1_000_000));
    write(d.path(), "trace.jsonl.2", &trace(2, 6, 2_000_000));
    write(d.path(), "trace.jsonl.3", &trace(3, 6, 3_000_000));
    // Never reached: the budget is passed at .3.
    write(d.path(), "trace.jsonl.4", "not a trace\n");
    std::env::set_var("KOPT_TIMELINE_MAX_ACTIVITIES", "15");
    let err = kopt_ingest::read_kopt_trace_set(&d.path().join("trace.jsonl"))
        .unwrap_err()
        .to_string();
    std::env::remove_var("KOPT_TIMELINE_MAX_ACTIVITIES");
    assert!(
        err.contains("with trace.jsonl.3 beside it, more than 15 GPU activities (12 in the 2 file(s) merged before it)"),
        "{err}"
    );
    assert!(err.contains("KOPT_TIMELINE_MAX_ACTIVITIES="), "{err}");
    assert!(!err.contains("trace.jsonl.4"), "{err}");
}

/// A sibling that is the trace again (hard link, symlink, copy) or another
/// sibling again is left out with a note, not merged a second time.
#[test]
fn a_sibling_that_repeats_a_file_is_merged_once() {
    let d = tempfile::tempdir().unwrap();
    let main = trace(1, 5, 1_000_000);
    write(d.path(), "trace.jsonl", &main);
    std::fs::hard_link(d.path().join("trace.jsonl"), d.path().join("trace.jsonl.5")).unwrap();
    std::os::unix::fs::symlink("trace.jsonl", d.path().join("trace.jsonl.6")).unwrap();
    write(d.path(), "trace.jsonl.476", &main);
    // Another process, merged; and a copy of it, not.
    let other = trace(2, 3, 2_000_000);
    write(d.path(), "trace.jsonl.7", &other);
    write(d.path(), "trace.jsonl.8", &other);
    let t = kopt_ingest::read_kopt_trace_set(&d.path().join("trace.jsonl")).unwrap();
    assert_eq!(t.timeline.activities.len(), 8, "5 + 3 kernels");
    assert_eq!(t.merged_files, ["trace.jsonl.7"]);
    assert_eq!(
        t.repeats_left_out,
        [
            "trace.jsonl.476 (the same records as trace.jsonl)",
            "trace.jsonl.5 (the same file as trace.jsonl)",
            "trace.jsonl.6 (the same file as trace.jsonl)",
            "trace.jsonl.8 (the same records as trace.jsonl.7)",
        ]
    );
    let f = t.source_format();
    assert!(
        f.contains("left out trace.jsonl.476 (the same records as trace.jsonl), trace.jsonl.5"),
        "{f}"
    );
}
