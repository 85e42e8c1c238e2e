//! A whole-model finding's gain and predicted speed-up from the kernel
//! time it saves, and the words its action quotes them in.

/// The gain and predicted speed-up of a finding that saves `saved_ns` of
/// `total_ns` kernel time (`kernel_pct`: the share of its own kernels'
/// time), the estimate removing all of it, `low` the cautious end.
pub(crate) fn saved_time_gain(
    saved_ns: f64,
    total_ns: f64,
    kernel_pct: f64,
    low: f64,
    model: String,
) -> (kopt_model::GainEstimate, kopt_model::PredictedSpeedup) {
    let estimate = total_ns / (total_ns - saved_ns);
    (
        kopt_model::GainEstimate {
            kernel_pct,
            workload_pct: 100.0 * saved_ns / total_ns,
            saved_ns,
            method: model.clone(),
        },
        kopt_model::PredictedSpeedup {
            estimate,
            low,
            high: estimate,
            model,
        },
    )
}

/// "1.36x (1.00-1.36x) for the workload's kernel time": a finding's
/// prediction as its action quotes it.
pub(crate) fn kernel_time_speedup_words(sp: &kopt_model::PredictedSpeedup) -> String {
    format!(
        "{}x ({}) for the workload's kernel time",
        kopt_model::figure::ratio(sp.estimate, 2),
        kopt_model::figure::ratio_range(sp.low, sp.high, 2)
    )
}
