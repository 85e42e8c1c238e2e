//! #39, round 8: what one trace holds twice, or of two GPU models, is said.

fn kineto(events: &str, devices: &str) -> kopt_model::Profile {
    let text = format!(r#"{{"traceEvents": [{events}], "deviceProperties": [{devices}]}}"#);
    let t = kopt_ingest::parse_kineto(text.as_bytes(), "t.json").unwrap();
    kopt_ingest::profile_from_trace(t, "t.json")
}

fn kernel(ts: u64, device: u32, correlation: u64) -> String {
    format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "k", "ts": {ts}, "dur": 5, "pid": {device}, "tid": 7, "args": {{"device": {device}, "stream": 7, "correlation": {correlation}}}}}"#
    )
}

const H100: &str = r#"{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}"#;
const A100: &str = r#"{"id": 1, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108}"#;

#[test]
fn a_kernel_recorded_twice_counts_once_and_is_said() {
    let events: Vec<String> = (0..4).map(|i| kernel(100 + 10 * i, 0, i + 1)).collect();
    let mut twice = events.clone();
    twice.extend(events.iter().take(3).cloned());
    let p = kineto(&twice.join(","), H100);
    assert_eq!(p.launches.len(), 4);
    assert!(
        p.sources[0]
            .format
            .contains("3 record(s) repeating another activity exactly"),
        "{}",
        p.sources[0].format
    );
    // Four distinct launches stay four, nothing said.
    let p = kineto(&events.join(","), H100);
    assert_eq!(p.launches.len(), 4);
    assert!(
        !p.sources[0].format.contains("repeating"),
        "{}",
        p.sources[0].format
    );
}

#[test]
fn kernels_of_two_gpu_models_are_said() {
    let events = [kernel(100, 0, 1), kernel(100, 0, 2), kernel(200, 1, 3)].join(",");
    let p = kineto(&events, &format!("{H100}, {A100}"));
    let f = &p.sources[0].format;
    assert!(
        f.contains("GPUs of other models too (NVIDIA A100-SXM4-80GB (device 1))"),
        "{f}"
    );
    // Two GPUs of one model: nothing to say.
    let same = A100.replace("A100-SXM4-80GB", "H100 80GB HBM3");
    let p = kineto(&events, &format!("{H100}, {same}"));
    assert!(
        !p.sources[0].format.contains("other models"),
        "{}",
        p.sources[0].format
    );
    // A second GPU described but running nothing: nothing to say.
    let p = kineto(&[kernel(100, 0, 1)].join(","), &format!("{H100}, {A100}"));
    assert!(
        !p.sources[0].format.contains("other models"),
        "{}",
        p.sources[0].format
    );
}

/// An ncu details page with a second Duration row for one launch: the
/// larger silently replaced the other (662 us became 1000 s).
#[test]
fn a_second_metric_row_for_one_launch_is_refused() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/h100-probe/ncu_details.csv"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let row = text
        .lines()
        .find(|l| l.contains("\"Duration\""))
        .expect("a Duration row");
    // The same row with another value (a 9 before it).
    let doubled = row.replacen("\"Duration\",\"us\",\"", "\"Duration\",\"us\",\"9", 1);
    assert_ne!(doubled, row);
    let bad = format!("{text}{doubled}\n");
    let e = kopt_ingest::parse_ncu_csv(bad.as_bytes(), "d.csv")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a second \"GPU Speed Of Light Throughput / Duration\" row"),
        "{e}"
    );
    // The same row repeated with its own value is harmless.
    let same = format!("{text}{row}\n");
    assert!(kopt_ingest::parse_ncu_csv(same.as_bytes(), "d.csv").is_ok());
    assert!(kopt_ingest::parse_ncu_csv(text.as_bytes(), "d.csv").is_ok());
}
