//! #39: a UTF-8 byte-order mark (editors on Windows write one) made a
//! Kineto trace unreadable; it reads as the same trace without it.

use std::path::PathBuf;

#[test]
fn a_bom_before_a_kineto_trace_is_skipped() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/synthetic-timelines/kineto_profiler_steps.json");
    let plain = kopt_ingest::read_kineto(&src).unwrap();
    let d = tempfile::tempdir().unwrap();
    let with_bom = d.path().join("bom.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(&src).unwrap());
    std::fs::write(&with_bom, bytes).unwrap();
    let t = kopt_ingest::read_kineto(&with_bom).unwrap();
    assert_eq!(t.events_read, plain.events_read);
    assert_eq!(t.repaired, None);
    assert_eq!(t.timeline.activities.len(), plain.timeline.activities.len());
}
