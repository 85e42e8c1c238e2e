//! Hostile input to the engine's validators (#27): `--timeout 1e300` and
//! `--max-time 1e19` panicked in `Duration::from_secs_f64`; a 40k-term tune
//! constraint overflowed the stack.

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

#[test]
fn a_40k_term_constraint_is_refused_not_a_stack_overflow() {
    use kopt_engine::tune::space::Expr;
    let long = vec!["B"; 40_000].join(" + ") + " > 0";
    let run = std::thread::Builder::new()
        // The stack of a Python thread is about this size.
        .stack_size(2 << 20)
        .spawn(move || Expr::parse(&long, &["B"]).map(|_| ()))
        .unwrap();
    match run.join().unwrap() {
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("tokens; a constraint has at most"), "{m:.200}")
        }
        other => panic!("{other:?}"),
    }
    // A long but reasonable one still parses and evaluates.
    let ok = vec!["B"; 200].join(" + ") + " > 0";
    let e = Expr::parse(&ok, &["B"]).unwrap();
    let point = [("B".to_string(), "2".to_string())].into_iter().collect();
    assert!(e.eval(&point).is_ok());
}

/// #39: `tune --space` read a FIFO (blocking forever) or a device whole.
#[test]
fn a_space_file_that_is_a_fifo_or_device_is_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("space.txt");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o644) }, 0);
    for p in [fifo, std::path::PathBuf::from("/dev/zero")] {
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || {
            let _ = tx.send(kopt_engine::tune::space::parse_file(&q).map(|_| ()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{}: blocked", p.display()));
        let e = r.unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::os::raw::c_char, mode: u32) -> i32;
}
