//! The bare run's step file (`bare_steps.jsonl`): read beside a trace in a
//! run folder, bad lines refused with their number.

use kopt_ingest::{read_bare_steps, read_kopt_trace_set, BARE_STEPS_FILE};

const TRACE: &str = r#"{"t":"process","pid":1}
{"t":"kernel","name":"k","s":1000,"e":2000,"dev":0,"str":7,"c":1,"g":[1,1,1],"b":[32,1,1],"reg":16,"smem":0,"graph":0}
{"t":"end","records":1,"dropped":0,"lost_buffers":0}
"#;

#[test]
fn steps_beside_a_trace_join_its_timeline() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("trace.jsonl"), TRACE).unwrap();
    std::fs::write(
        d.path().join(BARE_STEPS_FILE),
        "{\"t\":\"bare_step\",\"name\":\"step\",\"s\":300,\"e\":400}\n{\"t\":\"bare_step\",\"name\":\"step\",\"s\":100,\"e\":200}\n",
    )
    .unwrap();
    let t = read_kopt_trace_set(&d.path().join("trace.jsonl")).unwrap();
    let b = t.timeline.bare_steps.unwrap();
    assert_eq!(b.range, "step");
    assert_eq!(b.spans_ns, vec![(100, 200), (300, 400)]);
}

#[test]
fn a_trace_without_the_file_has_no_bare_steps() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("trace.jsonl"), TRACE).unwrap();
    let t = read_kopt_trace_set(&d.path().join("trace.jsonl")).unwrap();
    assert!(t.timeline.bare_steps.is_none());
}

#[test]
fn the_most_repeated_family_wins_and_bad_lines_say_where() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(BARE_STEPS_FILE);
    std::fs::write(
        &p,
        "{\"t\":\"bare_step\",\"name\":\"a\",\"s\":1,\"e\":2}\n{\"t\":\"bare_step\",\"name\":\"b\",\"s\":3,\"e\":4}\n{\"t\":\"bare_step\",\"name\":\"b\",\"s\":5,\"e\":6}\n",
    )
    .unwrap();
    assert_eq!(read_bare_steps(&p).unwrap().unwrap().range, "b");
    std::fs::write(
        &p,
        "{\"t\":\"bare_step\",\"name\":\"a\",\"s\":1,\"e\":2}\nnot json\n",
    )
    .unwrap();
    let e = read_bare_steps(&p).unwrap_err().to_string();
    assert!(e.contains(":2") || e.contains("line 2"), "{e}");
    std::fs::write(&p, "{\"t\":\"bare_step\",\"name\":\"a\",\"s\":9,\"e\":2}\n").unwrap();
    let e = read_bare_steps(&p).unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
    std::fs::write(&p, "").unwrap();
    assert!(read_bare_steps(&p).unwrap().is_none());
}

/// `step#3` is a `step`: numbered ranges form one family; steps of another
/// process are a group of their own (the largest is the run's).
#[test]
fn numbered_steps_are_one_family_per_process() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(BARE_STEPS_FILE);
    let mut text = String::new();
    for i in 0..4 {
        text.push_str(&format!(
            "{{\"t\":\"bare_step\",\"pid\":7,\"name\":\"step#{i}\",\"s\":{},\"e\":{}}}\n",
            100 * i,
            100 * i + 50
        ));
    }
    text.push_str("{\"t\":\"bare_step\",\"pid\":8,\"name\":\"step#0\",\"s\":5,\"e\":6}\n");
    text.push_str("{\"t\":\"other\"}\n");
    std::fs::write(&p, text).unwrap();
    let b = read_bare_steps(&p).unwrap().unwrap();
    assert_eq!(b.range, "step");
    assert_eq!(b.spans_ns.len(), 4);
}

/// A sync-only bare run (a program without step ranges) leaves the ends of
/// the host's synchronising calls: one span each, the family
/// `BARE_SYNC_RANGE`, in order.
#[test]
fn sync_ends_of_a_bare_run_are_read_as_their_own_family() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(BARE_STEPS_FILE);
    std::fs::write(
        &p,
        "{\"t\":\"bare_sync\",\"pid\":7,\"e\":300}\n{\"t\":\"bare_sync\",\"pid\":7,\"e\":100}\n{\"t\":\"bare_sync\",\"pid\":7,\"e\":200}\n",
    )
    .unwrap();
    let b = read_bare_steps(&p).unwrap().unwrap();
    assert_eq!(b.range, kopt_model::BARE_SYNC_RANGE);
    assert_eq!(b.spans_ns, vec![(100, 100), (200, 200), (300, 300)]);
    std::fs::write(&p, "{\"t\":\"bare_sync\",\"pid\":7}\n").unwrap();
    let e = read_bare_steps(&p).unwrap_err().to_string();
    assert!(e.contains("line 1") || e.contains(":1"), "{e}");
}

/// A run's files copied out under the workload's name (`moe.trace.jsonl.gz`
/// beside `moe.bare_steps.jsonl`, as the fixtures keep them): the trace
/// alone picks up its own steps, names the file in its source, and never a
/// neighbour's (`mlp.bare_steps.jsonl`) or the run folder's name.
#[test]
fn a_workloads_steps_beside_its_renamed_trace_are_read() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(TRACE.as_bytes()).unwrap();
    std::fs::write(d.path().join("moe.trace.jsonl.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(d.path().join("mlp.trace.jsonl"), TRACE).unwrap();
    std::fs::write(d.path().join("other.trace.jsonl"), TRACE).unwrap();
    std::fs::write(
        d.path().join("moe.bare_steps.jsonl"),
        "{\"t\":\"bare_step\",\"name\":\"moe\",\"s\":100,\"e\":200}\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("mlp.bare_steps.jsonl"),
        "{\"t\":\"bare_step\",\"name\":\"mlp\",\"s\":100,\"e\":300}\n",
    )
    .unwrap();
    // A run folder's file beside renamed traces belongs to none of them.
    std::fs::write(
        d.path().join(BARE_STEPS_FILE),
        "{\"t\":\"bare_step\",\"name\":\"run\",\"s\":1,\"e\":2}\n",
    )
    .unwrap();

    let moe = read_kopt_trace_set(&d.path().join("moe.trace.jsonl.gz")).unwrap();
    assert_eq!(moe.timeline.bare_steps.as_ref().unwrap().range, "moe");
    assert_eq!(moe.bare_steps_file.as_deref(), Some("moe.bare_steps.jsonl"));
    assert!(
        moe.source_format()
            .contains("bare run's steps from moe.bare_steps.jsonl"),
        "{}",
        moe.source_format()
    );
    let mlp = read_kopt_trace_set(&d.path().join("mlp.trace.jsonl")).unwrap();
    assert_eq!(mlp.timeline.bare_steps.unwrap().spans_ns, vec![(100, 300)]);
    let other = read_kopt_trace_set(&d.path().join("other.trace.jsonl")).unwrap();
    assert!(other.timeline.bare_steps.is_none());
    assert!(other.bare_steps_file.is_none());
    assert_eq!(other.source_format(), "kopt trace (CUPTI)");
}

#[test]
fn the_step_file_beside_a_trace_is_named_after_it() {
    use kopt_ingest::bare_steps_beside;
    let d = std::path::Path::new("/runs/x");
    for (trace, bare) in [
        ("trace.jsonl", "bare_steps.jsonl"),
        ("trace.jsonl.gz", "bare_steps.jsonl"),
        ("moe.trace.jsonl", "moe.bare_steps.jsonl"),
        ("moe.trace.jsonl.gz", "moe.bare_steps.jsonl"),
        ("a.b.trace.jsonl.gz", "a.b.bare_steps.jsonl"),
        (".trace.jsonl", "bare_steps.jsonl"),
        ("moe.jsonl", "bare_steps.jsonl"),
    ] {
        assert_eq!(bare_steps_beside(d, trace), d.join(bare), "{trace}");
    }
}

/// A launch-count bare run's marks: `(time, ordinal)` under the launch
/// range of their `every`; a bad mark is refused with its line.
#[test]
fn launch_marks_are_read_as_time_and_ordinal() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(BARE_STEPS_FILE);
    std::fs::write(
        &p,
        "{\"t\":\"bare_launch\",\"pid\":4,\"every\":300,\"n\":300,\"e\":2000}\n{\"t\":\"bare_launch\",\"pid\":4,\"every\":300,\"n\":0,\"e\":1000}\n",
    )
    .unwrap();
    let b = read_bare_steps(&p).unwrap().unwrap();
    assert_eq!(kopt_model::bare_launch_every(&b.range), Some(300));
    assert_eq!(b.spans_ns, vec![(1000, 0), (2000, 300)]);
    std::fs::write(
        &p,
        "{\"t\":\"bare_launch\",\"pid\":4,\"every\":0,\"n\":0,\"e\":1000}\n",
    )
    .unwrap();
    let e = read_bare_steps(&p).unwrap_err().to_string();
    assert!(e.contains("out of range") && e.contains(":1"), "{e}");
    std::fs::write(&p, "{\"t\":\"bare_launch\",\"pid\":4,\"n\":0,\"e\":1000}\n").unwrap();
    assert!(read_bare_steps(&p).is_err());
}

/// #39: step times that cannot be one step's are refused with their line
/// and why: none, negative, over a day, not a whole number of ns.
#[test]
fn implausible_step_times_are_refused_with_their_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(BARE_STEPS_FILE);
    let ok = "{\"t\":\"bare_step\",\"name\":\"s\",\"s\":100,\"e\":200}\n";
    for (bad, why) in [
        ("\"s\":500,\"e\":500", "no time"),
        ("\"s\":-500,\"e\":500", "outside the clock"),
        ("\"s\":1,\"e\":90000000000001", "longer than a day"),
        ("\"s\":1,\"e\":1e308", "not a bare-step line"),
        ("\"s\":1,\"e\":NaN", "not a bare-step line"),
    ] {
        let text = format!("{ok}{{\"t\":\"bare_step\",\"name\":\"s\",{bad}}}\n");
        std::fs::write(&p, text).unwrap();
        let e = read_bare_steps(&p).unwrap_err().to_string();
        assert!(e.contains(":2") && e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn steps_are_in_process_only_when_every_line_says_so() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(kopt_ingest::BARE_STEPS_FILE);
    let line = |i: i64, flag: bool| {
        format!(
            "{{\"t\":\"bare_step\",\"pid\":5,\"name\":\"kopt_step\",\"s\":{},\"e\":{}{}}}\n",
            1_000 + i * 100,
            1_050 + i * 100,
            if flag { ",\"in_process\":true" } else { "" }
        )
    };
    let all: String = (0..4).map(|i| line(i, true)).collect();
    std::fs::write(&p, all).unwrap();
    assert!(
        kopt_ingest::read_bare_steps(&p)
            .unwrap()
            .unwrap()
            .in_process
    );
    // One line that says so among others that do not: not in process.
    let mixed: String = (0..4).map(|i| line(i, i == 0)).collect();
    std::fs::write(&p, mixed).unwrap();
    assert!(
        !kopt_ingest::read_bare_steps(&p)
            .unwrap()
            .unwrap()
            .in_process
    );
}
