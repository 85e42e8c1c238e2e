//! The one bound every timed sample passes, wherever it comes from: a
//! run kopt timed, a run that printed its own samples, a harness's
//! result file or a cached trial read back from the history database.

/// The shortest sample kopt accepts: a nanosecond. No GPU step or
/// process run takes less; a smaller figure (0, 1e-300) was not measured
/// and would make any candidate look faster by any factor.
pub const MIN_SAMPLE_NS: f64 = 1.0;

/// The longest sample kopt accepts: 1e13 ns (about 2.8 hours), the
/// longest kernel launch kopt reads from ncu. Anything longer is no
/// measurement, and medians and ratios over it stop being finite.
pub const MAX_SAMPLE_NS: f64 = 1e13;

/// The most samples kopt keeps of one variant (bench, tune, a harness's
/// result, a cached trial): enough for any interval, and a bound on the
/// memory and the bootstrap's time.
pub const MAX_SAMPLES: usize = 50_000;

/// `ns` is a sample kopt can trust: finite, within
/// [`MIN_SAMPLE_NS`]..=[`MAX_SAMPLE_NS`].
pub fn sample_ns_in_bounds(ns: f64) -> bool {
    ns.is_finite() && (MIN_SAMPLE_NS..=MAX_SAMPLE_NS).contains(&ns)
}

/// [`sample_ns_in_bounds`] for a sample in seconds. Compared in seconds
/// (the bound divided, never the sample multiplied) so that 1e-9 s, one
/// nanosecond, is inside.
pub fn sample_s_in_bounds(s: f64) -> bool {
    s.is_finite() && (MIN_SAMPLE_NS / 1e9..=MAX_SAMPLE_NS / 1e9).contains(&s)
}

/// The rule in words, for errors and notes.
pub fn sample_bounds_text() -> String {
    format!("between {MIN_SAMPLE_NS} ns and {MAX_SAMPLE_NS:e} ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_hold_at_their_edges_and_refuse_what_no_run_takes() {
        for ok in [1.0, 1e13, 1500.0] {
            assert!(sample_ns_in_bounds(ok), "{ok}");
            assert!(sample_s_in_bounds(ok / 1e9), "{ok}");
        }
        for bad in [0.0, -1.0, 0.999, 1e-300, 1.0001e13, f64::NAN, f64::INFINITY] {
            assert!(!sample_ns_in_bounds(bad), "{bad}");
            assert!(!sample_s_in_bounds(bad / 1e9), "{bad}");
        }
        assert!(sample_s_in_bounds(1e-9));
        assert!(sample_s_in_bounds(1e4));
        assert!(!sample_s_in_bounds(-1.0));
        assert_eq!(sample_bounds_text(), "between 1 ns and 1e13 ns");
    }
}
