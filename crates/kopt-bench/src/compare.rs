//! The correctness gate: relative L2 error, max abs error, NaN / Inf counts,
//! per-dtype tolerances, shape and dtype mismatches, and outputs that cannot
//! depend on their input (constant or all zero).
//!
//! Tensors are compared element by element as their bytes are converted
//! (one pass, nothing widened into a vector): memory stays that of the files.
//! The result types live in [`kopt_model::compare`].

use std::collections::BTreeMap;

pub use kopt_model::compare::{CompareReport, TensorComparison};
use kopt_model::tensor::{Scalar, Tensor, TensorFormat};
use kopt_model::text::echo;

/// The name [`TensorComparison`] had here.
pub type Comparison = TensorComparison;

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

/// Default element-wise tolerances (atol, rtol) by element type, for the
/// rule |candidate - reference| <= atol + rtol * |reference|
/// (torch.allclose's): loose enough for a reordered reduction, tight
/// enough that a sign flip or a wrong element fails whatever the L2 says.
pub fn default_elementwise(dtype: &str, tf32: bool) -> (f64, f64) {
    match dtype {
        "f64" => (1e-10, 1e-8),
        "f32" if tf32 => (1e-3, 5e-3),
        "f32" => (1e-5, 1e-4),
        "f16" => (1e-3, 1e-2),
        "bf16" => (1e-2, 5e-2),
        // Integers and booleans must match exactly.
        _ => (0.0, 0.0),
    }
}

/// What the gate applies: the relative L2 tolerance, the element-wise
/// atol and rtol (None: by dtype), tf32, and whether a changed dtype is
/// allowed (it fails otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gate {
    pub tol: Option<f64>,
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    pub tf32: bool,
    pub allow_dtype_change: bool,
}

impl Gate {
    /// The relative L2 tolerance alone (the rest by default).
    pub fn l2(tol: Option<f64>, tf32: bool) -> Gate {
        Gate {
            tol,
            tf32,
            ..Gate::default()
        }
    }
}

/// Values already widened to f64, for [`compare`]. Files are compared
/// through [`compare_tensor`] and [`compare_tensors`], which never widen.
pub struct Side<'a> {
    pub dtype: &'a str,
    pub shape: &'a [usize],
    pub values: &'a [f64],
}

/// One tensor given as f64 values (see [`Side`]).
pub fn compare(
    name: &str,
    reference: Side,
    candidate: Side,
    tolerance: Option<f64>,
    tf32: bool,
) -> TensorComparison {
    compare_elements(
        name,
        (reference.dtype, reference.shape),
        (candidate.dtype, candidate.shape),
        reference.values.iter().map(|&v| Scalar::Float(v)),
        candidate.values.iter().map(|&v| Scalar::Float(v)),
        &Gate::l2(tolerance, tf32),
    )
}

/// One tensor against another, element by element, whatever their names.
pub fn compare_tensor(
    name: &str,
    reference: &Tensor,
    candidate: &Tensor,
    tolerance: Option<f64>,
    tf32: bool,
) -> TensorComparison {
    compare_tensor_gate(name, reference, candidate, &Gate::l2(tolerance, tf32))
}

/// [`compare_tensor`] with every setting of the gate.
pub fn compare_tensor_gate(
    name: &str,
    reference: &Tensor,
    candidate: &Tensor,
    gate: &Gate,
) -> TensorComparison {
    compare_elements(
        name,
        (reference.dtype.name(), &reference.shape),
        (candidate.dtype.name(), &candidate.shape),
        reference.scalars(),
        candidate.scalars(),
        gate,
    )
}

/// An L2 norm accumulated with scaling (LAPACK's dnrm2), so squares of
/// large values cannot overflow to infinity and make the ratio NaN.
#[derive(Default)]
struct Norm {
    scale: f64,
    ssq: f64,
}

impl Norm {
    fn add(&mut self, x: f64) {
        let a = x.abs();
        if a == 0.0 || a.is_nan() {
            return;
        }
        if a > self.scale {
            let r = self.scale / a;
            self.ssq = 1.0 + self.ssq * r * r;
            self.scale = a;
        } else {
            let r = a / self.scale;
            self.ssq += r * r;
        }
    }

    fn value(&self) -> f64 {
        self.scale * self.ssq.sqrt()
    }

    /// self / other, or self alone where other is zero.
    fn relative_to(&self, other: &Norm) -> f64 {
        if other.scale > 0.0 {
            (self.scale / other.scale) * (self.ssq / other.ssq).sqrt()
        } else {
            self.value()
        }
    }
}

/// NaN and infinity counts of one side.
#[derive(Default)]
struct NonFinite {
    nan: u64,
    inf: u64,
}

impl NonFinite {
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            self.nan += 1;
        } else if v.is_infinite() {
            self.inf += 1;
        }
    }
}

/// Whether every candidate element is the same value.
struct Constant {
    first: Option<f64>,
    all_same: bool,
    count: u64,
}

impl Constant {
    fn add(&mut self, v: f64) {
        self.count += 1;
        match self.first {
            None => self.first = Some(v),
            Some(f) if v == f || (v.is_nan() && f.is_nan()) => {}
            Some(_) => self.all_same = false,
        }
    }
}

fn compare_elements(
    name: &str,
    (r_dtype, r_shape): (&str, &[usize]),
    (c_dtype, c_shape): (&str, &[usize]),
    reference: impl ExactSizeIterator<Item = Scalar>,
    candidate: impl ExactSizeIterator<Item = Scalar>,
    gate: &Gate,
) -> TensorComparison {
    let tf32 = gate.tf32;
    // The looser of the two types sets the default: a bf16 candidate against
    // an f32 reference is judged as bf16.
    let tol = gate
        .tol
        .unwrap_or_else(|| default_tolerance(r_dtype, tf32).max(default_tolerance(c_dtype, tf32)));
    let (r_el, c_el) = (
        default_elementwise(r_dtype, tf32),
        default_elementwise(c_dtype, tf32),
    );
    let atol = gate.atol.unwrap_or(r_el.0.max(c_el.0));
    // A relative L2 tolerance given (--tol) loosens the element-wise rtol
    // to it too, unless rtol is given.
    let rtol = gate
        .rtol
        .unwrap_or(r_el.1.max(c_el.1).max(gate.tol.unwrap_or(0.0)));
    let mut c = TensorComparison {
        name: name.to_string(),
        reference_dtype: r_dtype.into(),
        candidate_dtype: c_dtype.into(),
        reference_shape: r_shape.to_vec(),
        candidate_shape: c_shape.to_vec(),
        rel_l2: None,
        max_abs: None,
        tolerance: tol,
        nan: (0, 0),
        inf: (0, 0),
        compared: 0,
        atol: Some(atol),
        rtol: Some(rtol),
        mismatched: 0,
        passed: false,
        problems: Vec::new(),
        warnings: Vec::new(),
    };
    if r_dtype != c_dtype {
        if gate.allow_dtype_change {
            c.warnings.push(format!(
                "dtype differs: reference {r_dtype}, candidate {c_dtype} (allowed; tolerances from the looser one)"
            ));
        } else {
            c.problems.push(format!(
                "dtype differs: reference {r_dtype}, candidate {c_dtype} (--allow-dtype-change / allow_dtype_change=True compares them with the looser one's tolerances)"
            ));
        }
    }
    let (mut r_nf, mut c_nf) = (NonFinite::default(), NonFinite::default());
    let (r_len, c_len) = (reference.len(), candidate.len());
    if r_shape != c_shape || r_len != c_len {
        reference.for_each(|v| r_nf.add(v.to_f64()));
        candidate.for_each(|v| c_nf.add(v.to_f64()));
        c.nan = (r_nf.nan, c_nf.nan);
        c.inf = (r_nf.inf, c_nf.inf);
        c.problems.push(if r_shape != c_shape {
            format!("shape differs: reference {r_shape:?}, candidate {c_shape:?}")
        } else {
            format!("element count differs: reference {r_len}, candidate {c_len}")
        });
        return c;
    }
    let (mut diff, mut base) = (Norm::default(), Norm::default());
    let mut max_abs = 0.0f64;
    let mut compared = 0u64;
    let mut mismatched = 0u64;
    let mut first_mismatch: Option<(u64, f64, f64)> = None;
    // Non-finite where the other is finite, either way round; non-finite in
    // both but not the same (NaN against Inf, +Inf against -Inf); the same.
    let (mut bad_candidate, mut bad_reference, mut differ, mut same) = (0u64, 0u64, 0u64, 0u64);
    let mut constant = Constant {
        first: None,
        all_same: true,
        count: 0,
    };
    for (r, o) in reference.zip(candidate) {
        let (rf, of) = (r.to_f64(), o.to_f64());
        r_nf.add(rf);
        c_nf.add(of);
        constant.add(of);
        match (rf.is_finite(), of.is_finite()) {
            (true, true) => {
                // Integers subtract exactly (an i64 difference fits an i128).
                let d = match (r, o) {
                    (Scalar::Int(a), Scalar::Int(b)) => (i128::from(b) - i128::from(a)) as f64,
                    _ => of - rf,
                };
                diff.add(d);
                base.add(rf);
                max_abs = max_abs.max(d.abs());
                // torch.allclose's rule; NaN bounds (never here) fail it.
                let within = matches!(
                    d.abs().partial_cmp(&(atol + rtol * rf.abs())),
                    Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
                );
                if !within {
                    if mismatched == 0 {
                        first_mismatch = Some((compared, rf, of));
                    }
                    mismatched += 1;
                }
                compared += 1;
            }
            (true, false) => bad_candidate += 1,
            (false, true) => bad_reference += 1,
            (false, false) if (rf.is_nan() && of.is_nan()) || rf == of => same += 1,
            (false, false) => differ += 1,
        }
    }
    c.nan = (r_nf.nan, c_nf.nan);
    c.inf = (r_nf.inf, c_nf.inf);
    c.compared = compared;
    if bad_candidate > 0 {
        c.problems.push(format!(
            "{bad_candidate} element(s) are NaN or Inf where the reference is finite"
        ));
    }
    if bad_reference > 0 {
        c.problems.push(format!(
            "{bad_reference} element(s) are finite where the reference is NaN or Inf"
        ));
    }
    if differ > 0 {
        c.problems.push(format!(
            "{differ} element(s) are NaN or Inf in both but not the same (NaN against Inf, or Inf of the other sign)"
        ));
    }
    if compared > 0 {
        let rel = diff.relative_to(&base);
        c.rel_l2 = Some(rel);
        c.max_abs = Some(max_abs);
        // A NaN error or tolerance compares as neither: it fails.
        let within = matches!(
            rel.partial_cmp(&tol),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        );
        if !within {
            c.problems.push(format!(
                "relative L2 error {rel:.3e} exceeds the {c_dtype} tolerance {tol:.1e}"
            ));
        }
        c.mismatched = mismatched;
        if let Some((at, r, o)) = first_mismatch {
            c.problems.push(format!(
                "{mismatched} of {compared} element(s) ({:.2}%) differ by more than atol + rtol*|reference| (atol {atol:.1e}, rtol {rtol:.1e}, torch.allclose's rule); the first, element {at} (flat index among those compared): reference {}, candidate {}",
                100.0 * mismatched as f64 / compared as f64,
                // As read, but never 309 digits (1e300 printed whole).
                kopt_model::figure::as_read(r),
                kopt_model::figure::as_read(o)
            ));
        }
    } else if r_len > 0 {
        c.problems.push(format!(
            "nothing compared: no element is finite in both ({} of {r_len} reference element(s) are NaN, {} Inf)",
            r_nf.nan, r_nf.inf
        ));
    } else {
        c.warnings
            .push("the tensor is empty: nothing to compare".to_string());
    }
    if same > 0 && compared > 0 {
        c.warnings.push(format!(
            "{same} element(s) are NaN or Inf in both at the same places: not compared"
        ));
    }
    if let (Some(first), true, true) = (constant.first, constant.all_same, constant.count > 1) {
        let what = if first == 0.0 { "all zero" } else { "constant" };
        c.warnings.push(format!(
            "the candidate output is {what}: it may not depend on the input (never test on zeros; draw fresh random inputs)"
        ));
    }
    c.passed = c.problems.is_empty();
    c
}

/// A tensor that only one side holds: it fails.
fn missing(name: &str, present: &Tensor, in_reference: bool) -> TensorComparison {
    let (dtype, shape) = (present.dtype.name().to_string(), present.shape.clone());
    let (reference, candidate) = if in_reference {
        ((dtype, shape), (String::new(), Vec::new()))
    } else {
        ((String::new(), Vec::new()), (dtype, shape))
    };
    TensorComparison {
        name: name.into(),
        reference_dtype: reference.0,
        candidate_dtype: candidate.0,
        reference_shape: reference.1,
        candidate_shape: candidate.1,
        rel_l2: None,
        max_abs: None,
        tolerance: 0.0,
        nan: (0, 0),
        inf: (0, 0),
        compared: 0,
        atol: None,
        rtol: None,
        mismatched: 0,
        passed: false,
        problems: vec![if in_reference {
            "missing from the candidate".into()
        } else {
            "missing from the reference".into()
        }],
        warnings: Vec::new(),
    }
}

/// The one tensor of a side that is a single `.npy` file.
fn single_npy(ts: &[Tensor]) -> Option<&Tensor> {
    match ts {
        [t] if t.format == TensorFormat::Npy => Some(t),
        _ => None,
    }
}

/// Why a `.npy` file cannot pair with the other side, if it cannot.
fn layout_problem(reference: &[Tensor], candidate: &[Tensor]) -> Option<String> {
    let (npy_side, npy, other_side, other) = match (single_npy(reference), single_npy(candidate)) {
        (Some(_), Some(_)) | (None, None) => return None,
        (Some(t), None) => ("reference", t, "candidate", candidate),
        (None, Some(t)) => ("candidate", t, "reference", reference),
    };
    match other {
        [] => None,
        [t] if t.name == npy.name => None,
        [t] => Some(format!(
            "the {npy_side} is a .npy file, whose one tensor is named '{}' after its file, and the {other_side}'s one tensor is '{}': a .npy pairs only with a tensor of its file's name",
            echo(&npy.name),
            echo(&t.name)
        )),
        many => Some(format!(
            "the {npy_side} is a .npy file (one tensor, '{}') and the {other_side} holds {} tensors: compare files of the same kind (one .npy each, or .safetensors with the same names)",
            echo(&npy.name),
            many.len()
        )),
    }
}

/// Every tensor of `reference` against its pair in `candidate`, and the
/// verdict: two single `.npy` files pair whatever their names, everything
/// else pairs by name (a tensor without a pair fails). The gate passes only
/// when every tensor passes and at least one element was compared: two
/// empty files, or tensors that are all NaN, prove nothing.
pub fn compare_tensors(
    reference: &[Tensor],
    candidate: &[Tensor],
    tol: Option<f64>,
    tf32: bool,
) -> CompareReport {
    compare_tensors_gate(reference, candidate, &Gate::l2(tol, tf32))
}

/// [`compare_tensors`] with every setting of the gate.
pub fn compare_tensors_gate(
    reference: &[Tensor],
    candidate: &[Tensor],
    gate: &Gate,
) -> CompareReport {
    let mut problems = Vec::new();
    for (side, ts) in [("reference", reference), ("candidate", candidate)] {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for t in ts {
            *counts.entry(t.name.as_str()).or_default() += 1;
        }
        for (name, n) in counts.into_iter().filter(|&(_, n)| n > 1) {
            problems.push(format!(
                "tensor '{}' appears {n} times in the {side}: it cannot be paired by name",
                echo(name)
            ));
        }
    }
    let mut paired = 0usize;
    let tensors: Vec<TensorComparison> = match (single_npy(reference), single_npy(candidate)) {
        (Some(r), Some(c)) => {
            paired = 1;
            vec![compare_tensor_gate(&r.name, r, c, gate)]
        }
        _ => {
            if let Some(p) = layout_problem(reference, candidate) {
                problems.push(p);
            }
            let mut by_name: BTreeMap<&str, (Option<&Tensor>, Option<&Tensor>)> = BTreeMap::new();
            for t in reference {
                by_name
                    .entry(t.name.as_str())
                    .or_default()
                    .0
                    .get_or_insert(t);
            }
            for t in candidate {
                by_name
                    .entry(t.name.as_str())
                    .or_default()
                    .1
                    .get_or_insert(t);
            }
            by_name
                .into_iter()
                .filter_map(|(name, pair)| match pair {
                    (Some(r), Some(c)) => {
                        paired += 1;
                        Some(compare_tensor_gate(name, r, c, gate))
                    }
                    (Some(r), None) => Some(missing(name, r, true)),
                    (None, Some(c)) => Some(missing(name, c, false)),
                    (None, None) => None,
                })
                .collect()
        }
    };
    if paired == 0 {
        problems.push(if reference.is_empty() && candidate.is_empty() {
            "nothing compared: neither file holds a tensor".to_string()
        } else {
            format!(
                "nothing compared: the reference holds {} tensor(s), the candidate {}, and none pair up",
                reference.len(),
                candidate.len()
            )
        });
    } else if tensors.iter().all(|t| t.compared == 0) {
        problems.push(
            "nothing compared: no paired tensor has an element finite in both files".to_string(),
        );
    }
    CompareReport {
        schema: kopt_model::SCHEMA.to_string(),
        passed: problems.is_empty() && !tensors.is_empty() && tensors.iter().all(|t| t.passed),
        tensors,
        problems,
    }
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
    fn a_huge_element_is_quoted_in_scientific_notation() {
        // Round seven: 1e300 was printed as 301 digits.
        let c = compare(
            "y",
            side("f64", &[2], &[-1e300, 1.0]),
            side("f64", &[2], &[1e300, 1.0]),
            None,
            false,
        );
        let said = c.problems.join(" ");
        assert!(said.contains("reference -1e300, candidate 1e300"), "{said}");
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
        assert_eq!(c.compared, 100);
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
        assert!(!c.passed);
        assert!(c.problems[0].contains("dtype differs"), "{:?}", c.problems);
        assert!(c.problems[0].contains("--allow-dtype-change"));
        // Allowed: a warning, judged by the looser type.
        let c = compare_elements(
            "y",
            ("f32", &[6]),
            ("bf16", &[6]),
            r.iter().map(|&v| Scalar::Float(v)),
            r.iter().map(|&v| Scalar::Float(v)),
            &Gate {
                allow_dtype_change: true,
                ..Gate::default()
            },
        );
        assert!(c.passed, "{:?}", c.problems);
        assert!(c.warnings[0].contains("dtype differs"));
    }

    #[test]
    fn sign_flips_under_a_large_element_fail_element_wise() {
        // 10 of 11 elements sign-flipped, one large element the same: the
        // relative L2 error is small enough for bf16, and this passed.
        let mut r = vec![1.0; 11];
        r[0] = 1000.0;
        let o: Vec<f64> = r
            .iter()
            .enumerate()
            .map(|(i, v)| if i == 0 { *v } else { -v })
            .collect();
        let c = compare(
            "y",
            side("bf16", &[11], &r),
            side("bf16", &[11], &o),
            None,
            false,
        );
        assert!(c.rel_l2.unwrap() < 1e-2, "{:?}", c.rel_l2);
        assert!(!c.passed);
        assert_eq!(c.mismatched, 10);
        let p = c.problems.iter().find(|p| p.contains("atol")).unwrap();
        assert!(p.starts_with("10 of 11 element(s) (90.91%)"), "{p}");
        assert!(p.contains("element 1"), "{p}");
        // Given atol and rtol are used as they are.
        let c = compare_elements(
            "y",
            ("bf16", &[11]),
            ("bf16", &[11]),
            r.iter().map(|&v| Scalar::Float(v)),
            o.iter().map(|&v| Scalar::Float(v)),
            &Gate {
                atol: Some(2.5),
                rtol: Some(0.0),
                ..Gate::default()
            },
        );
        assert_eq!(c.mismatched, 0);
        assert!(c.passed, "{:?}", c.problems);
    }

    #[test]
    fn an_all_nan_reference_never_passes() {
        let nan = vec![f64::NAN; 8];
        let r = data(8);
        // Against any finite candidate.
        let c = compare(
            "y",
            side("f32", &[8], &nan),
            side("f32", &[8], &r),
            None,
            false,
        );
        assert!(!c.passed);
        assert!(
            c.problems
                .contains(&"8 element(s) are finite where the reference is NaN or Inf".into()),
            "{:?}",
            c.problems
        );
        // Against itself: NaN in the same places, but nothing compared.
        let c = compare(
            "y",
            side("f32", &[8], &nan),
            side("f32", &[8], &nan),
            None,
            false,
        );
        assert!(!c.passed);
        assert_eq!(c.compared, 0);
        assert_eq!(c.rel_l2, None);
        assert!(
            c.problems[0].starts_with("nothing compared"),
            "{:?}",
            c.problems
        );
    }

    #[test]
    fn non_finite_values_must_match_in_place_and_kind() {
        let mut r = data(6);
        r[1] = f64::NAN;
        r[2] = f64::NEG_INFINITY;
        // The same NaN and -Inf in the same places: compared on the rest, a warning.
        let c = compare(
            "y",
            side("f32", &[6], &r),
            side("f32", &[6], &r),
            None,
            false,
        );
        assert!(c.passed, "{:?}", c.problems);
        assert_eq!(c.compared, 4);
        assert_eq!((c.nan, c.inf), ((1, 1), (1, 1)));
        assert!(c.warnings[0].contains("2 element(s) are NaN or Inf in both at the same places"));
        // -Inf against +Inf, NaN against Inf.
        let mut o = r.clone();
        o[1] = f64::INFINITY;
        o[2] = f64::INFINITY;
        let c = compare(
            "y",
            side("f32", &[6], &r),
            side("f32", &[6], &o),
            None,
            false,
        );
        assert!(!c.passed);
        assert!(c.problems[0].starts_with("2 element(s) are NaN or Inf in both but not the same"));
    }

    #[test]
    fn huge_values_do_not_overflow_the_error_into_a_pass() {
        let r = [1e300, -1e300, 1e300];
        let o = [1e300, 1e300, 1e300];
        let c = compare(
            "y",
            side("f64", &[3], &r),
            side("f64", &[3], &o),
            None,
            false,
        );
        assert!(!c.passed, "{:?}", c);
        let rel = c.rel_l2.unwrap();
        assert!((rel - 2.0 / 3f64.sqrt()).abs() < 1e-12, "{rel}");
        // A NaN tolerance passes nothing.
        let c = compare(
            "y",
            side("f64", &[3], &r),
            side("f64", &[3], &r),
            Some(f64::NAN),
            false,
        );
        assert!(!c.passed);
    }

    #[test]
    fn integers_compare_exactly_beyond_f64_precision() {
        let t = |v: i64| {
            Tensor::new(
                "i",
                kopt_model::tensor::DType::I64,
                vec![1],
                kopt_model::tensor::ByteOrder::Little,
                v.to_le_bytes().to_vec(),
            )
            .unwrap()
        };
        let (a, b) = (t(1 << 60), t((1 << 60) + 1));
        assert_eq!((1i64 << 60) as f64, ((1i64 << 60) + 1) as f64);
        let c = compare_tensor("i", &a, &b, None, false);
        assert!(!c.passed);
        assert_eq!(c.max_abs, Some(1.0));
        assert!(compare_tensor("i", &a, &a, None, false).passed);
    }

    fn f32_tensor(name: &str, values: &[f64]) -> Tensor {
        Tensor::from_values(
            name,
            kopt_model::tensor::DType::F32,
            vec![values.len()],
            values,
        )
        .unwrap()
    }

    #[test]
    fn tensors_pair_by_name_and_a_missing_one_fails() {
        let reference = [f32_tensor("a", &[1.0, 2.0]), f32_tensor("b", &[3.0, 4.0])];
        // Written in another order, and without `a`.
        let candidate = [f32_tensor("b", &[3.0, 4.0])];
        let report = compare_tensors(&reference, &candidate, None, false);
        let by_name: Vec<(&str, bool)> = report
            .tensors
            .iter()
            .map(|c| (c.name.as_str(), c.passed))
            .collect();
        assert_eq!(by_name, vec![("a", false), ("b", true)]);
        assert_eq!(
            report.tensors[0].problems,
            vec!["missing from the candidate"]
        );
        assert_eq!(report.tensors[0].reference_dtype, "f32");
        assert!(!report.passed);
        assert_eq!(report.schema, "kopt/1");
    }

    #[test]
    fn nothing_to_compare_fails() {
        let r = compare_tensors(&[], &[], None, false);
        assert!(!r.passed);
        assert_eq!(
            r.problems,
            vec!["nothing compared: neither file holds a tensor"]
        );
        // Empty tensors only.
        let e = [f32_tensor("e", &[])];
        let r = compare_tensors(&e, &e, None, false);
        assert!(!r.passed, "{r:?}");
        assert!(r.tensors[0].passed);
        assert!(
            r.problems[0].starts_with("nothing compared"),
            "{:?}",
            r.problems
        );
        // An empty tensor beside a compared one is fine.
        let two = [f32_tensor("e", &[]), f32_tensor("x", &[1.0])];
        assert!(compare_tensors(&two, &two, None, false).passed);
    }

    #[test]
    fn duplicate_names_fail() {
        let r = [f32_tensor("a", &[1.0]), f32_tensor("a", &[2.0])];
        let report = compare_tensors(&r, &r[..1], None, false);
        assert!(!report.passed);
        assert!(report.problems[0].contains("tensor 'a' appears 2 times in the reference"));
    }
}
