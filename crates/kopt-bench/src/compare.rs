//! The correctness gate: relative L2 error, max abs error, NaN / Inf counts,
//! per-dtype tolerances, shape and dtype mismatches, and outputs that cannot
//! depend on their input (constant or all zero).

use serde::Serialize;

/// Default relative-L2 tolerance by element type (DESIGN.md; tf32 on request).
pub fn default_tolerance(dtype: &str, tf32: bool) -> f64 {
    match dtype {
        "f64" => 1e-12,
        "f32" if tf32 => 5e-4,
        "f32" => 1e-5,
        "f16" | "bf16" => 1e-2,
        // Integers and booleans must match exactly.
        _ => 0.0,
    }
}

/// One compared tensor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub name: String,
    pub reference_dtype: String,
    pub candidate_dtype: String,
    pub reference_shape: Vec<usize>,
    pub candidate_shape: Vec<usize>,
    pub rel_l2: Option<f64>,
    pub max_abs: Option<f64>,
    pub tolerance: f64,
    pub nan: (u64, u64),
    pub inf: (u64, u64),
    pub passed: bool,
    /// Why it failed, or what looks wrong even when it passed.
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

pub struct Side<'a> {
    pub dtype: &'a str,
    pub shape: &'a [usize],
    pub values: &'a [f64],
}

pub fn compare(
    name: &str,
    reference: Side,
    candidate: Side,
    tolerance: Option<f64>,
    tf32: bool,
) -> Comparison {
    // The looser of the two types sets the default: a bf16 candidate against
    // an f32 reference is judged as bf16.
    let tol = tolerance.unwrap_or_else(|| {
        default_tolerance(reference.dtype, tf32).max(default_tolerance(candidate.dtype, tf32))
    });
    let count = |v: &[f64], f: fn(&f64) -> bool| v.iter().filter(|x| f(x)).count() as u64;
    let mut c = Comparison {
        name: name.to_string(),
        reference_dtype: reference.dtype.into(),
        candidate_dtype: candidate.dtype.into(),
        reference_shape: reference.shape.to_vec(),
        candidate_shape: candidate.shape.to_vec(),
        rel_l2: None,
        max_abs: None,
        tolerance: tol,
        nan: (
            count(reference.values, |x| x.is_nan()),
            count(candidate.values, |x| x.is_nan()),
        ),
        inf: (
            count(reference.values, |x| x.is_infinite()),
            count(candidate.values, |x| x.is_infinite()),
        ),
        passed: false,
        problems: Vec::new(),
        warnings: Vec::new(),
    };
    if reference.dtype != candidate.dtype {
        c.warnings.push(format!(
            "dtype differs: reference {}, candidate {} (tolerance {tol:e} from the looser one)",
            reference.dtype, candidate.dtype
        ));
    }
    if reference.shape != candidate.shape {
        c.problems.push(format!(
            "shape differs: reference {:?}, candidate {:?}",
            reference.shape, candidate.shape
        ));
        return c;
    }
    let (mut diff2, mut ref2, mut max_abs) = (0.0f64, 0.0f64, 0.0f64);
    let mut nan_where_finite = 0u64;
    for (r, o) in reference.values.iter().zip(candidate.values) {
        if r.is_finite() && !o.is_finite() {
            nan_where_finite += 1;
            continue;
        }
        if r.is_finite() && o.is_finite() {
            let d = o - r;
            diff2 += d * d;
            ref2 += r * r;
            max_abs = max_abs.max(d.abs());
        }
    }
    let rel = if ref2 > 0.0 {
        (diff2 / ref2).sqrt()
    } else {
        diff2.sqrt()
    };
    c.rel_l2 = Some(rel);
    c.max_abs = Some(max_abs);
    if nan_where_finite > 0 {
        c.problems.push(format!(
            "{nan_where_finite} element(s) are NaN or Inf where the reference is finite"
        ));
    }
    if rel > tol {
        c.problems.push(format!(
            "relative L2 error {rel:.3e} exceeds the {} tolerance {tol:.1e}",
            candidate.dtype
        ));
    }
    if let Some(first) = candidate.values.first() {
        if candidate.values.len() > 1
            && candidate
                .values
                .iter()
                .all(|v| v == first || (v.is_nan() && first.is_nan()))
        {
            let what = if *first == 0.0 {
                "all zero"
            } else {
                "constant"
            };
            c.warnings.push(format!(
                "the candidate output is {what}: it may not depend on the input (never test on zeros; draw fresh random inputs)"
            ));
        }
    }
    c.passed = c.problems.is_empty();
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side<'a>(dtype: &'a str, shape: &'a [usize], values: &'a [f64]) -> Side<'a> {
        Side {
            dtype,
            shape,
            values,
        }
    }

    fn data(n: usize) -> Vec<f64> {
        let mut r = fastrand::Rng::with_seed(9);
        (0..n).map(|_| r.f64() * 2.0 - 1.0).collect()
    }

    #[test]
    fn identical_passes() {
        let v = data(100);
        let c = compare(
            "y",
            side("f32", &[100], &v),
            side("f32", &[100], &v),
            None,
            false,
        );
        assert!(c.passed, "{:?}", c.problems);
        assert_eq!(c.rel_l2, Some(0.0));
    }

    #[test]
    fn planted_nan_fails() {
        let r = data(100);
        let mut o = r.clone();
        o[17] = f64::NAN;
        let c = compare(
            "y",
            side("f32", &[100], &r),
            side("f32", &[100], &o),
            None,
            false,
        );
        assert!(!c.passed);
        assert_eq!(c.nan, (0, 1));
        assert!(c.problems[0].contains("NaN or Inf where the reference is finite"));
    }

    #[test]
    fn a_one_percent_error_fails_f32_and_passes_a_looser_tolerance() {
        let r = data(1000);
        let o: Vec<f64> = r.iter().map(|x| x * 1.01).collect();
        let f32c = compare(
            "y",
            side("f32", &[1000], &r),
            side("f32", &[1000], &o),
            None,
            false,
        );
        assert!(!f32c.passed);
        assert!((f32c.rel_l2.unwrap() - 0.01).abs() < 1e-9);
        let looser = compare(
            "y",
            side("f32", &[1000], &r),
            side("f32", &[1000], &o),
            Some(2e-2),
            false,
        );
        assert!(looser.passed);
    }

    #[test]
    fn shape_mismatch_and_constant_outputs_are_reported() {
        let r = data(6);
        let c = compare(
            "y",
            side("f32", &[2, 3], &r),
            side("f32", &[3, 2], &r),
            None,
            false,
        );
        assert!(!c.passed && c.problems[0].contains("shape differs"));
        let zeros = vec![0.0; 6];
        let c = compare(
            "y",
            side("f32", &[6], &zeros),
            side("f32", &[6], &zeros),
            None,
            false,
        );
        assert!(c.passed);
        assert!(c.warnings[0].contains("all zero"));
        let c = compare(
            "y",
            side("f32", &[6], &r),
            side("bf16", &[6], &r),
            None,
            false,
        );
        assert_eq!(c.tolerance, 1e-2);
        assert!(c.warnings[0].contains("dtype differs"));
    }
}
