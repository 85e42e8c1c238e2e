//! Figures of a report kopt stored, checked when it is read back (a run
//! folder's `report.json`, `-f json` output, a history row): the same
//! finite, plausible discipline as fresh input. A stored report is text
//! anyone can edit; a negative duration or a 1e308 must not reach a
//! renderer's bars, axes or loops.

use kopt_model::Diagnosis;

/// The largest figure kopt writes into a report: the roofline's rate
/// ceiling (a zetta-rate, far above any accelerator). Times in ns since
/// the epoch (about 1.8e18) and byte counts stay far below it.
pub const MAX_FIGURE: f64 = 1e21;

/// The largest percentage kopt writes: ncu's overshooting percentages of
/// peak are capped below it (see `ncu::PCT_CAPPED_UP_TO`).
pub const MAX_PCT: f64 = crate::ncu::PCT_CAPPED_UP_TO;

/// Keys whose figures are speedups: a ratio of two times, above zero.
const SPEEDUP_KEYS: &[&str] = &["estimate", "low", "high"];

/// The first figure of `v` (a report as JSON) kopt could not have
/// written, as `path = value: why`; None when all are plausible. No
/// figure kopt writes is negative; percentages stay within 0..=1000,
/// speedups above 0, everything within [`MAX_FIGURE`].
pub fn implausible_figure(v: &serde_json::Value) -> Option<String> {
    walk(v, &mut String::new(), &|key, n| {
        why_implausible(key, n.as_f64()?).or_else(|| why_implausible_count(key, n))
    })
}

/// [`implausible_figure`] for the measurement documents (bench, compare,
/// optimize, tune), where a change in percent may be negative: a figure
/// beyond any kopt writes, a count past 2^53, a negative time or speedup.
pub fn unmeasurable_figure(v: &serde_json::Value) -> Option<String> {
    walk(v, &mut String::new(), &|key, n| {
        let x = n.as_f64()?;
        let time_or_speedup =
            key.ends_with("_s") || key.ends_with("_ns") || key.contains("speedup");
        if !x.is_finite() || x.abs() > MAX_FIGURE {
            Some("beyond any figure kopt writes (1e21)")
        } else if time_or_speedup && x < 0.0 {
            Some("a negative time or speedup")
        } else {
            why_implausible_count(key, n)
        }
    })
}

type Rule<'a> = &'a dyn Fn(&str, &serde_json::Number) -> Option<&'static str>;

fn walk(v: &serde_json::Value, path: &mut String, rule: Rule) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::Object(m) => m.iter().find_map(|(k, v)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k);
            let found = walk(v, path, rule);
            path.truncate(len);
            found
        }),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, v)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let found = walk(v, path, rule);
            path.truncate(len);
            found
        }),
        Value::Number(n) => {
            let key = path.rsplit(['.', ']']).next().unwrap_or_default();
            rule(key, n).map(|why| format!("{} = {n}: {why}", crate::echo(path)))
        }
        _ => None,
    }
}

/// The largest whole number kopt writes that is not a time in ns: counts
/// of launches, samples, steps, bytes. Past 2^53 a count is no longer
/// exact as a float and its sums wrap (2^64-5 launches printed as "5").
const MAX_COUNT: u64 = 1 << 53;

/// Why a whole number under `key` cannot be one kopt wrote, if it cannot:
/// a count past [`MAX_COUNT`] (times in ns since the epoch excepted).
fn why_implausible_count(key: &str, n: &serde_json::Number) -> Option<&'static str> {
    let big = n.as_u64().is_some_and(|v| v > MAX_COUNT)
        || n.as_i64().is_some_and(|v| v.unsigned_abs() > MAX_COUNT);
    (big && !key.ends_with("_ns")).then_some("a count past 2^53, beyond any kopt writes")
}

/// Why figure `x` under `key` cannot be one kopt wrote, if it cannot.
fn why_implausible(key: &str, x: f64) -> Option<&'static str> {
    if !x.is_finite() || x.abs() > MAX_FIGURE {
        Some("beyond any figure kopt writes (1e21)")
    } else if x < 0.0 {
        Some("negative, where kopt writes no negative figure")
    } else if (key.ends_with("pct") || key.starts_with("pct_")) && x > MAX_PCT {
        Some("a percentage over 1000")
    } else if SPEEDUP_KEYS.contains(&key) && x == 0.0 {
        Some("a speedup of 0")
    } else {
        None
    }
}

/// A diagnosis read back, its figures checked: the first implausible one
/// named with its path, or Ok.
pub fn check_diagnosis(d: &Diagnosis) -> Result<(), String> {
    if let Some(why) = d.device.implausible().first() {
        return Err(format!("device.{why}"));
    }
    let v = serde_json::to_value(d).map_err(|e| format!("not a storable diagnosis: {e}"))?;
    match implausible_figure(&v) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fifth hostile round: a stored bench printed a "-5.000x" speed-up
    /// and 309-digit figures; a change in percent stays signed.
    #[test]
    fn measurement_documents_keep_signed_changes_and_refuse_impossible_figures() {
        let ok = serde_json::json!({"variants": [{"median_s": 0.01, "speedup_vs_first": 1.2, "delta_pct": -16.7}]});
        assert_eq!(unmeasurable_figure(&ok), None);
        for (bad, named) in [
            (
                serde_json::json!({"variants": [{"speedup_vs_first": -5.0}]}),
                "variants[0].speedup_vs_first",
            ),
            (
                serde_json::json!({"variants": [{"median_s": 1e308}]}),
                "variants[0].median_s",
            ),
            (serde_json::json!({"samples": u64::MAX}), "samples"),
        ] {
            let why = unmeasurable_figure(&bad).unwrap();
            assert!(why.starts_with(named), "{why}");
        }
    }

    #[test]
    fn the_first_implausible_figure_is_named_with_its_path() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"total_kernel_ns": 5.0, "kernels": [{"mean_ns": 3}, {"mean_ns": -5}]}"#,
        )
        .unwrap();
        assert_eq!(
            implausible_figure(&v).unwrap(),
            "kernels[1].mean_ns = -5: negative, where kopt writes no negative figure"
        );
        for (doc, why) in [
            (r#"{"total_kernel_ns": 1e308}"#, "beyond any figure"),
            (r#"{"a": {"pct_of_total": 5000}}"#, "percentage over 1000"),
            (r#"{"gain": {"estimate": 0}}"#, "a speedup of 0"),
        ] {
            let v: serde_json::Value = serde_json::from_str(doc).unwrap();
            let got = implausible_figure(&v).unwrap();
            assert!(got.contains(why), "{doc}: {got}");
        }
        let ok: serde_json::Value =
            serde_json::from_str(r#"{"start_ns": 1.8e18, "busy_pct": 99.5, "low": 0.7}"#).unwrap();
        assert_eq!(implausible_figure(&ok), None);
    }
}
