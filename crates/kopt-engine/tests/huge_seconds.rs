//! `--timeout 1e300` and `--max-time 1e19` panicked in
//! `Duration::from_secs_f64` in every command that takes them (#27): they
//! are usage errors now, and time budgets never panic.

use kopt_engine::bench::Measurement;
use kopt_engine::profile::{secs, timeout_from_secs, MAX_SECONDS};
use kopt_engine::Error;

#[test]
fn a_huge_timeout_is_a_usage_error() {
    for t in [1e300, 1e19, f64::MAX, MAX_SECONDS * 2.0] {
        match timeout_from_secs(Some(t)) {
            Err(Error::Usage(m)) => assert!(m.contains("--timeout must be at most"), "{m}"),
            other => panic!("{t}: {other:?}"),
        }
    }
    assert!(timeout_from_secs(Some(MAX_SECONDS)).unwrap().is_some());
}

#[test]
fn a_huge_max_time_is_a_usage_error() {
    for t in [1e19, 1e300] {
        let mut m = Measurement::default();
        m.stop.max_time_s = t;
        match m.validate() {
            Err(Error::Usage(msg)) => assert!(msg.contains("--max-time must be at most"), "{msg}"),
            other => panic!("{t}: {other:?}"),
        }
        let mut m = Measurement::default();
        m.stop.min_time_s = t;
        assert!(matches!(m.validate(), Err(Error::Usage(_))));
    }
    let mut r = kopt_engine::optimize::OptimizeRequest::new("m.py".into());
    r.max_time_s = 1e19;
    assert!(matches!(r.validate(), Err(Error::Usage(_))));
}

#[test]
fn seconds_saturate() {
    assert_eq!(secs(1e300), std::time::Duration::MAX);
    assert_eq!(secs(f64::INFINITY), std::time::Duration::MAX);
    assert_eq!(secs(f64::NAN), std::time::Duration::ZERO);
    assert_eq!(secs(-1.0), std::time::Duration::ZERO);
    assert_eq!(secs(1.5), std::time::Duration::from_millis(1500));
}
