//! Whether `kopt profile`'s counter pass can change the answer (#38).
//!
//! The timeline alone decides the whole-workload findings (graph capture,
//! compilation, precision, layout, syncs, copies): their gains come from
//! launches, names and shapes, not from counters. Counters decide one
//! kernel's cause, and a finding about one kernel saves at most that
//! kernel's whole time. So where the first finding from the timeline saves
//! more of the workload than a kernel's whole share, that kernel's counters
//! cannot change the first finding; where that holds for every kernel, the
//! pass (tens of seconds of replay under ncu) is skipped, with the reason.

use kopt_model::{kernel_function_name, Diagnosis};

/// What the counter pass should cover.
#[derive(Debug, Clone, PartialEq)]
pub enum CounterPlan {
    /// Every kernel carrying the time (no timeline finding ranks first).
    All,
    /// Only these kernels (bare function names): their whole time exceeds
    /// the first finding's gain, so their counters could outrank it.
    Kernels {
        functions: Vec<String>,
        reason: String,
    },
    /// None: no kernel's counters can change the first finding.
    Skip { reason: String },
}

/// The plan from a diagnosis of the timeline alone (no counters yet).
pub fn counter_plan(timeline_only: &Diagnosis) -> CounterPlan {
    let first = timeline_only.recommendations.first().map(|r| {
        // A withheld figure (too uncertain) decides nothing.
        let gain = r
            .gain
            .as_ref()
            .filter(|_| r.withheld().is_none())
            .map(|g| g.workload_pct);
        (r.title.as_str(), gain)
    });
    let kernels: Vec<Share> = timeline_only
        .kernels
        .iter()
        .map(|k| Share {
            function: kernel_function_name(&k.name),
            short_name: &k.short_name,
            pct: k.pct_of_total,
        })
        .collect();
    plan(first, &kernels)
}

/// A kernel's share of kernel time.
struct Share<'a> {
    function: String,
    short_name: &'a str,
    pct: f64,
}

/// The rule, on the first finding (title, workload gain %) and the kernels.
fn plan(first: Option<(&str, Option<f64>)>, kernels: &[Share]) -> CounterPlan {
    let Some((title, Some(g1))) = first else {
        return CounterPlan::All;
    };
    if !(g1.is_finite() && g1 > 0.0) {
        return CounterPlan::All;
    }
    // A kernel's share of kernel time is at least its share of the
    // workload's wall time: comparing it with the gain errs toward
    // collecting counters.
    let mut above: Vec<String> = Vec::new();
    for k in kernels.iter().filter(|k| k.pct >= g1) {
        if !above.contains(&k.function) {
            above.push(k.function.clone());
        }
    }
    let hottest = kernels.iter().max_by(|a, b| a.pct.total_cmp(&b.pct));
    let first_words = format!("the first finding ({title}) saves up to {g1:.1}% of the workload");
    match (above.is_empty(), hottest) {
        (true, Some(h)) => CounterPlan::Skip {
            reason: format!(
                "{first_words}, more than any kernel's whole time (the hottest, {}, {:.1}% of kernel time), so no kernel's counters can change it",
                h.short_name, h.pct
            ),
        },
        (true, None) => CounterPlan::Skip {
            reason: format!("{first_words} and no kernel was recorded"),
        },
        (false, _) => CounterPlan::Kernels {
            reason: format!(
                "{first_words}; only {} kernel{} take{} more of the time than that, so only their counters could outrank it",
                above.len(),
                if above.len() == 1 { "" } else { "s" },
                if above.len() == 1 { "s" } else { "" },
            ),
            functions: above,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &'static str, pct: f64) -> Share<'static> {
        Share {
            function: name.to_string(),
            short_name: name,
            pct,
        }
    }

    #[test]
    fn a_first_finding_larger_than_every_kernel_skips_the_pass() {
        let first = Some(("Capture the launch sequence in a CUDA graph", Some(76.3)));
        let CounterPlan::Skip { reason } =
            plan(first, &[kernel("gemm", 15.2), kernel("softmax", 10.8)])
        else {
            panic!("not skipped");
        };
        assert!(
            reason.contains("76.3%") && reason.contains("gemm, 15.2%"),
            "{reason}"
        );
    }

    #[test]
    fn only_kernels_that_could_outrank_the_first_finding_are_profiled() {
        let kernels = [
            kernel("gemm", 55.0),
            kernel("softmax", 30.0),
            kernel("add", 5.0),
        ];
        match plan(Some(("Enable TF32", Some(30.0))), &kernels) {
            CounterPlan::Kernels { functions, reason } => {
                assert_eq!(functions, ["gemm", "softmax"]);
                assert!(reason.contains("only 2 kernels take more"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_a_priced_first_finding_every_kernel_is_profiled() {
        let kernels = [kernel("gemm", 90.0)];
        assert_eq!(plan(None, &kernels), CounterPlan::All);
        assert_eq!(plan(Some(("Capture", None)), &kernels), CounterPlan::All);
        assert_eq!(
            plan(Some(("Capture", Some(f64::NAN))), &kernels),
            CounterPlan::All
        );
    }
}
