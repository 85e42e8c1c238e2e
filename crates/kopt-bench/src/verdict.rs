//! Seed 002's decision: faster by more than the threshold over the whole
//! interval -> KEEP; correctness failed, or the whole interval slower beyond
//! noise -> REVERT; anything else -> MARGINAL (collect more, or profile).

pub use kopt_model::{Interval, Verdict, VerdictKind};

/// `ratio`: candidate / baseline time (below 1 = faster). `threshold`: the
/// speed-up that counts (0.05 = 5%). `noise`: the slowdown still treated as
/// noise. `correct`: the correctness gate's result, when one ran.
pub fn decide(ratio: &Interval, threshold: f64, noise: f64, correct: Option<bool>) -> Verdict {
    let pct = |r: f64| 100.0 * (1.0 - r);
    if correct == Some(false) {
        return Verdict {
            kind: VerdictKind::Revert,
            reason: "the candidate's output differs from the baseline's beyond tolerance".into(),
            next: "fix correctness first; speed does not count for a wrong answer".into(),
        };
    }
    if ratio.high < 1.0 - threshold {
        return Verdict {
            kind: VerdictKind::Keep,
            reason: format!(
                "faster by {:.1}% (interval {:.1}% to {:.1}%, {:.0}% confidence), all above the {:.0}% threshold",
                pct(ratio.estimate),
                pct(ratio.high),
                pct(ratio.low),
                100.0 * ratio.confidence,
                100.0 * threshold
            ),
            next: "keep the change and record it in the journal".into(),
        };
    }
    if ratio.low > 1.0 + noise {
        return Verdict {
            kind: VerdictKind::Revert,
            reason: format!(
                "slower by {:.1}% (interval {:.1}% to {:.1}% slower), beyond the {:.1}% noise band",
                -pct(ratio.estimate),
                -pct(ratio.low),
                -pct(ratio.high),
                100.0 * noise
            ),
            next: "revert, and write down why it failed".into(),
        };
    }
    Verdict {
        kind: VerdictKind::Marginal,
        reason: format!(
            "time {:+.1}% (interval {:+.1}% to {:+.1}%): not clearly past the {:.0}% threshold",
            100.0 * (ratio.estimate - 1.0),
            100.0 * (ratio.low - 1.0),
            100.0 * (ratio.high - 1.0),
            100.0 * threshold
        ),
        next: "collect more samples, or profile both versions to see what moved".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::bootstrap_median_ratio;

    fn interval(e: f64, lo: f64, hi: f64) -> Interval {
        Interval {
            estimate: e,
            low: lo,
            high: hi,
            confidence: 0.95,
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(
            decide(&interval(0.90, 0.88, 0.92), 0.05, 0.01, None).kind,
            VerdictKind::Keep
        );
        assert_eq!(
            decide(&interval(0.96, 0.94, 0.98), 0.05, 0.01, None).kind,
            VerdictKind::Marginal
        );
        assert_eq!(
            decide(&interval(1.03, 1.02, 1.04), 0.05, 0.01, None).kind,
            VerdictKind::Revert
        );
        let m = decide(&interval(1.005, 0.99, 1.02), 0.05, 0.01, None);
        assert_eq!(m.kind, VerdictKind::Marginal);
        assert_eq!(
            m.reason,
            "time +0.5% (interval -1.0% to +2.0%): not clearly past the 5% threshold"
        );
        assert_eq!(
            decide(&interval(0.5, 0.4, 0.6), 0.05, 0.01, Some(false)).kind,
            VerdictKind::Revert
        );
    }

    /// Seed 002's experiment in miniature, on synthetic timings: a 10% faster
    /// variant is KEEP in at least 19 of 20 trials, a 3% slower one never.
    #[test]
    fn ten_percent_faster_keeps_three_percent_slower_never_does() {
        let run = |factor: f64, trial: u64| {
            let mut r = fastrand::Rng::with_seed(1000 + trial);
            let mut draw = |base: f64| {
                (0..15)
                    .map(|_| base * (1.0 + 0.03 * (r.f64() - 0.5)))
                    .collect::<Vec<_>>()
            };
            let b = draw(100.0);
            let c = draw(100.0 * factor);
            let i = bootstrap_median_ratio(&b, &c, 1000, 0.95, trial).unwrap();
            decide(&i, 0.05, 0.01, Some(true)).kind
        };
        let keeps = (0..20)
            .filter(|&t| run(0.90, t) == VerdictKind::Keep)
            .count();
        assert!(keeps >= 19, "{keeps}/20");
        assert!((0..20).all(|t| run(1.03, t) != VerdictKind::Keep));
    }
}
