//! Numbers for people, in every report format and message. Rust prints an
//! f64 in full (`{}` of 1e300 is 301 digits), `inf` and `NaN` as such, and
//! a denormal in scientific notation as `4.9e-324`: a figure that came from
//! anyone's file must read as a figure or say it is not one.

/// The magnitude from which a figure is written in scientific notation.
const SCIENTIFIC_FROM: f64 = 1e9;

/// The largest speed-up (or ratio of two times) written as a number, and
/// its inverse the smallest: past it a model's figure says nothing (a time
/// divided by a time near zero), so it is written in words.
pub const RATIO_SHOWN_UP_TO: f64 = 1000.0;

/// `x` with `decimals` places: "n/a" when it is not finite, scientific
/// notation from 1e9 on (never hundreds of digits), and a figure that is
/// not zero but would print as zero as "<0.01" (never a denormal's
/// 4.9e-324 or a misleading "0.00").
pub fn figure(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let a = x.abs();
    if a >= SCIENTIFIC_FROM {
        return format!("{x:.2e}");
    }
    let step = 10f64.powi(-(decimals.min(12) as i32));
    if a != 0.0 && a < step / 2.0 {
        let sign = if x < 0.0 { "-" } else { "" };
        return format!("{sign}<{step:.decimals$}");
    }
    let s = format!("{x:.decimals$}");
    // A negative that rounds to zero is not "-0".
    match s.strip_prefix('-') {
        Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => rest.to_string(),
        _ => s,
    }
}

/// A speed-up or another ratio of times with `decimals` places, as
/// [`figure`], and past [`RATIO_SHOWN_UP_TO`] (or below its inverse) in
/// words: "over 1000", "under 0.001".
pub fn ratio(x: f64, decimals: usize) -> String {
    if x.is_finite() && x > RATIO_SHOWN_UP_TO {
        format!("over {RATIO_SHOWN_UP_TO:.0}")
    } else if x.is_finite() && x > 0.0 && x < 1.0 / RATIO_SHOWN_UP_TO {
        format!("under {}", 1.0 / RATIO_SHOWN_UP_TO)
    } else {
        figure(x, decimals)
    }
}

/// A value quoted as it was read, every digit kept, but in scientific
/// notation past 1e15 or below 1e-6 (`{}` of 1e300 is 301 digits, of
/// 5e-324 as many zeros); "inf" and "NaN" as they are (it is the input).
pub fn as_read(x: f64) -> String {
    let a = x.abs();
    if a.is_finite() && (a >= 1e15 || (a != 0.0 && a < 1e-6)) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A range of speed-ups, "1.00-1.36x", each bound as [`ratio`]; a bound
/// in words is set apart: "1.6x to over 1000x"; "n/a" without both.
pub fn ratio_range(low: f64, high: f64, decimals: usize) -> String {
    if !(low.is_finite() && high.is_finite()) {
        return "n/a".into();
    }
    let (lo, hi) = (ratio(low, decimals), ratio(high, decimals));
    let numeric = |s: &str| s.starts_with(|c: char| c.is_ascii_digit());
    if numeric(&lo) && numeric(&hi) {
        format!("{lo}-{hi}x")
    } else {
        format!("{lo}x to {hi}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sixth hostile round (L4): "4.9e-324" in a % column, "inf GB/s"
    /// and 301-digit figures in notes, a range "(1.6-999999959.4x)".
    #[test]
    fn extreme_figures_read_as_figures_or_say_they_are_none() {
        assert_eq!(figure(4.9e-324, 2), "<0.01");
        assert_eq!(figure(-4.9e-324, 1), "-<0.1");
        assert_eq!(figure(f64::INFINITY, 0), "n/a");
        assert_eq!(figure(f64::NAN, 1), "n/a");
        assert_eq!(figure(1e300, 0), "1.00e300");
        assert_eq!(figure(-0.004, 2), "-<0.01");
        assert_eq!(figure(-0.0001, 0), "-<1");
        assert_eq!(figure(0.0, 1), "0.0");
        assert_eq!(figure(-0.0, 1), "0.0");
        assert_eq!(figure(2987.44, 0), "2987");
        assert_eq!(figure(12.345, 1), "12.3");
        assert_eq!(ratio(999_999_959.4, 1), "over 1000");
        assert_eq!(ratio(1e-7, 2), "under 0.001");
        assert_eq!(ratio(1.6, 1), "1.6");
        assert_eq!(ratio(f64::INFINITY, 2), "n/a");
        assert_eq!(ratio_range(1.0, 1.36, 2), "1.00-1.36x");
        assert_eq!(as_read(1e300), "1e300");
        assert_eq!(as_read(4.9e-324), "5e-324");
        assert_eq!(as_read(1234.5), "1234.5");
        assert_eq!(ratio_range(1.6, 999_999_959.4, 1), "1.6x to over 1000x");
        assert_eq!(ratio_range(f64::NAN, 2.0, 1), "n/a");
        for x in [1e300, f64::MAX, 5e-324, f64::MIN_POSITIVE, -1e300] {
            for d in 0..4 {
                let s = figure(x, d);
                assert!(s.len() < 16, "{x} with {d}: {s}");
            }
        }
    }
}
