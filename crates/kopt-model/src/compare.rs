//! The correctness gate's results (`kopt compare`, `kopt bench --check`):
//! one [`TensorComparison`] per tensor name, and the [`CompareReport`] that
//! carries the overall verdict. Plain data; the comparison itself is
//! `kopt_bench::compare_tensors`.

use serde::{Deserialize, Serialize};

/// One tensor of the reference against its pair in the candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TensorComparison {
    pub name: String,
    /// Empty when the tensor is missing from the reference.
    pub reference_dtype: String,
    /// Empty when the tensor is missing from the candidate.
    pub candidate_dtype: String,
    pub reference_shape: Vec<usize>,
    pub candidate_shape: Vec<usize>,
    /// Relative L2 error over the elements finite in both (absolute L2 when
    /// the reference's norm is zero); `None` when nothing was compared.
    pub rel_l2: Option<f64>,
    /// Largest absolute difference over the elements finite in both.
    pub max_abs: Option<f64>,
    /// The relative L2 tolerance applied.
    pub tolerance: f64,
    /// NaN counts: (reference, candidate).
    pub nan: (u64, u64),
    /// Infinity counts: (reference, candidate).
    pub inf: (u64, u64),
    /// Elements finite in both, the ones the error figures are computed on.
    #[serde(default)]
    pub compared: u64,
    /// The element-wise rule applied beside the relative L2 error:
    /// |candidate - reference| <= atol + rtol * |reference| (torch.allclose's).
    #[serde(default)]
    pub atol: Option<f64>,
    #[serde(default)]
    pub rtol: Option<f64>,
    /// Elements (finite in both) outside the element-wise rule.
    #[serde(default)]
    pub mismatched: u64,
    pub passed: bool,
    /// Why it failed.
    pub problems: Vec<String>,
    /// What looks wrong even when it passed.
    pub warnings: Vec<String>,
}

/// The gate's verdict on two files of tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompareReport {
    /// [`crate::SCHEMA`].
    pub schema: String,
    /// Every tensor passed, at least one element was compared, and there is
    /// no problem below.
    pub passed: bool,
    /// One entry per tensor name, in name order.
    pub tensors: Vec<TensorComparison>,
    /// Problems of the pair of files rather than of one tensor (nothing
    /// compared, files that cannot be paired...).
    #[serde(default)]
    pub problems: Vec<String>,
}

impl CompareReport {
    /// The names of the tensors that failed.
    pub fn failed_tensors(&self) -> impl Iterator<Item = &str> {
        self.tensors
            .iter()
            .filter(|t| !t.passed)
            .map(|t| t.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_tensors_names_only_the_failures() {
        let t = |name: &str, passed: bool| TensorComparison {
            name: name.into(),
            reference_dtype: "f32".into(),
            candidate_dtype: "f32".into(),
            reference_shape: vec![2],
            candidate_shape: vec![2],
            rel_l2: Some(0.0),
            max_abs: Some(0.0),
            tolerance: 1e-5,
            nan: (0, 0),
            inf: (0, 0),
            compared: 2,
            atol: None,
            rtol: None,
            mismatched: 0,
            passed,
            problems: Vec::new(),
            warnings: Vec::new(),
        };
        let r = CompareReport {
            schema: crate::SCHEMA.into(),
            passed: false,
            tensors: vec![t("a", true), t("b", false)],
            problems: Vec::new(),
        };
        assert_eq!(r.failed_tensors().collect::<Vec<_>>(), vec!["b"]);
    }
}
