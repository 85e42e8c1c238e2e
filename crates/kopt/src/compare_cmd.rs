//! `kopt compare`: the correctness gate on two outputs.

use kopt_bench::{compare, Comparison, Side};
use kopt_ingest::tensor::{read_tensors, Tensor};

use crate::cli::CompareArgs;
use crate::exit::Failure;

pub fn run(a: &CompareArgs) -> Result<(), Failure> {
    if !matches!(a.format.as_str(), "term" | "json") {
        return Err(Failure::Usage(format!(
            "--format {} is not one of term, json",
            a.format
        )));
    }
    if let Some(t) = a.tol {
        if !(t.is_finite() && t >= 0.0) {
            return Err(Failure::Usage(format!(
                "--tol must be a non-negative number, got {t}"
            )));
        }
    }
    let reference = read_tensors(&a.reference).map_err(|e| Failure::Error(e.into()))?;
    let candidate = read_tensors(&a.candidate).map_err(|e| Failure::Error(e.into()))?;
    let results = compare_tensors(&reference, &candidate, a.tol, a.tf32);
    let passed = results.iter().all(|c| c.passed);
    if a.format == "json" {
        let doc = serde_json::json!({ "schema": "kopt/1", "passed": passed, "tensors": results });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("serialisable")
        );
    } else {
        for c in &results {
            println!(
                "{}: {}  rel L2 {}  (tolerance {:.1e}), max abs {}, NaN {}/{}, Inf {}/{}  [{} {:?} vs {} {:?}]",
                c.name,
                if c.passed { "PASS" } else { "FAIL" },
                c.rel_l2.map_or("-".into(), |v| format!("{v:.3e}")),
                c.tolerance,
                c.max_abs.map_or("-".into(), |v| format!("{v:.3e}")),
                c.nan.0,
                c.nan.1,
                c.inf.0,
                c.inf.1,
                c.reference_dtype,
                c.reference_shape,
                c.candidate_dtype,
                c.candidate_shape
            );
            for p in &c.problems {
                println!("  problem: {p}");
            }
            for w in &c.warnings {
                println!("  warning: {w}");
            }
        }
        println!(
            "{}",
            if passed {
                "correctness: PASS"
            } else {
                "correctness: FAIL (verdict REVERT)"
            }
        );
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect();
    crate::history_cmd::record(
        &a.db,
        kopt_store::RunRow {
            id: 0,
            kind: "compare".into(),
            started_utc: crate::run_record::utc_timestamp(std::time::SystemTime::now()),
            command: format!(
                "kopt compare {} {}",
                a.reference.display(),
                a.candidate.display()
            ),
            device: None,
            git_rev: kopt_store::git_revision(std::path::Path::new(".")),
            summary: if passed {
                format!("{} tensor(s) within tolerance", results.len())
            } else {
                format!("failed: {}", failed.join(", "))
            },
            verdict: Some(if passed { "PASS" } else { "REVERT" }.into()),
            run_dir: None,
            report_json: serde_json::to_string(&results).ok(),
        },
    );
    if passed {
        Ok(())
    } else {
        Err(Failure::Regression)
    }
}

/// Every tensor of `reference` against its pair in `candidate` (a tensor
/// without a pair fails); `kopt bench --check` gates variants with it too.
pub fn compare_tensors(
    reference: &[Tensor],
    candidate: &[Tensor],
    tol: Option<f64>,
    tf32: bool,
) -> Vec<Comparison> {
    fn side(t: &Tensor) -> Side<'_> {
        Side {
            dtype: t.dtype.name(),
            shape: &t.shape,
            values: &t.values,
        }
    }
    pair_up(reference, candidate)
        .into_iter()
        .map(|(name, r, c)| match (r, c) {
            (Some(r), Some(c)) => compare(&name, side(r), side(c), tol, tf32),
            (r, c) => missing(&name, r.is_some(), c.is_some()),
        })
        .collect()
}

/// Single `.npy` files pair up whatever their names; `.safetensors` pair by tensor name.
fn pair_up<'a>(
    r: &'a [Tensor],
    c: &'a [Tensor],
) -> Vec<(String, Option<&'a Tensor>, Option<&'a Tensor>)> {
    if r.len() == 1 && c.len() == 1 {
        return vec![(r[0].name.clone(), Some(&r[0]), Some(&c[0]))];
    }
    let mut names: Vec<&str> = r.iter().chain(c).map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|n| {
            (
                n.to_string(),
                r.iter().find(|t| t.name == n),
                c.iter().find(|t| t.name == n),
            )
        })
        .collect()
}

fn missing(name: &str, in_reference: bool, in_candidate: bool) -> Comparison {
    Comparison {
        name: name.into(),
        reference_dtype: String::new(),
        candidate_dtype: String::new(),
        reference_shape: Vec::new(),
        candidate_shape: Vec::new(),
        rel_l2: None,
        max_abs: None,
        tolerance: 0.0,
        nan: (0, 0),
        inf: (0, 0),
        passed: false,
        problems: vec![match (in_reference, in_candidate) {
            (true, false) => "missing from the candidate".into(),
            _ => "missing from the reference".into(),
        }],
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_ingest::tensor::DType;

    fn tensor(name: &str, values: &[f64]) -> Tensor {
        Tensor {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![values.len()],
            values: values.to_vec(),
        }
    }

    #[test]
    fn tensors_pair_by_name_and_a_missing_one_fails() {
        let reference = [tensor("a", &[1.0, 2.0]), tensor("b", &[3.0, 4.0])];
        // Written in another order, and without `a`.
        let candidate = [tensor("b", &[3.0, 4.0])];
        let results = compare_tensors(&reference, &candidate, None, false);
        let by_name: Vec<(&str, bool)> = results
            .iter()
            .map(|c| (c.name.as_str(), c.passed))
            .collect();
        assert_eq!(by_name, vec![("a", false), ("b", true)]);
        assert_eq!(results[0].problems, vec!["missing from the candidate"]);
    }
}
