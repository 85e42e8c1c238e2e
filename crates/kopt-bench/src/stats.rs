//! Sample statistics: medians, noise, outliers, adaptive stopping and a
//! seeded bootstrap interval of the median ratio.

use serde::Serialize;

pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Median absolute deviation over the median: a noise measure robust to outliers.
pub fn relative_noise(v: &[f64]) -> Option<f64> {
    let m = median(v)?;
    if m == 0.0 {
        return None;
    }
    let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    // 1.4826 scales the MAD to a standard deviation for normal data.
    Some(1.4826 * median(&dev)? / m)
}

/// Indices of samples outside Tukey's fences (1.5 IQR beyond the quartiles).
pub fn outliers(v: &[f64]) -> Vec<usize> {
    if v.len() < 4 {
        return Vec::new();
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let pos = p * (s.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
    };
    let (q1, q3) = (q(0.25), q(0.75));
    let iqr = q3 - q1;
    let (lo, hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
    v.iter()
        .enumerate()
        .filter(|(_, x)| **x < lo || **x > hi)
        .map(|(i, _)| i)
        .collect()
}

/// When sampling may stop (nvbench's rule): at least `min_samples` and
/// `min_time_s`, then once the relative noise is under `noise_target`, or at `max_time_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StopRule {
    pub min_samples: usize,
    pub min_time_s: f64,
    pub noise_target: f64,
    pub max_time_s: f64,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule {
            min_samples: 10,
            min_time_s: 0.5,
            noise_target: 0.005,
            max_time_s: 10.0,
        }
    }
}

impl StopRule {
    pub fn should_stop(&self, samples: &[f64], elapsed_s: f64) -> bool {
        if elapsed_s >= self.max_time_s {
            return true;
        }
        if samples.len() < self.min_samples || elapsed_s < self.min_time_s {
            return false;
        }
        relative_noise(samples).is_some_and(|n| n <= self.noise_target)
    }
}

pub use kopt_model::Interval;

/// Bootstrap interval of median(candidate) / median(baseline), resampling
/// each side independently, with a seeded generator so results reproduce.
/// A ratio below 1 means the candidate is faster (times are durations).
pub fn bootstrap_median_ratio(
    baseline: &[f64],
    candidate: &[f64],
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Option<Interval> {
    let estimate = median(candidate)? / median(baseline)?;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut draw = |v: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend((0..v.len()).map(|_| v[rng.usize(..v.len())]));
        median(buf)
    };
    let (mut b, mut c) = (
        Vec::with_capacity(baseline.len()),
        Vec::with_capacity(candidate.len()),
    );
    let mut ratios: Vec<f64> = (0..resamples.max(1))
        .filter_map(|_| Some(draw(candidate, &mut c)? / draw(baseline, &mut b)?))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let at =
        |p: f64| ratios[((p * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some(Interval {
        estimate,
        low: at(tail),
        high: at(1.0 - tail),
        confidence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic "timings": a base value with seeded multiplicative noise.
    fn timings(base: f64, noise: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut r = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| base * (1.0 + noise * (r.f64() - 0.5) * 2.0))
            .collect()
    }

    #[test]
    fn medians_and_noise() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(relative_noise(&[5.0; 8]), Some(0.0));
        let n = relative_noise(&timings(100.0, 0.02, 200, 1)).unwrap();
        assert!(n > 0.005 && n < 0.03, "{n}");
    }

    #[test]
    fn tukey_outliers() {
        let mut v = vec![10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.02];
        v.push(14.0);
        assert_eq!(outliers(&v), vec![7]);
        assert!(outliers(&[1.0, 2.0]).is_empty());
    }

    #[test]
    fn stopping() {
        let r = StopRule::default();
        let quiet = vec![100.0; 20];
        assert!(!r.should_stop(&quiet[..5], 1.0), "too few samples");
        assert!(!r.should_stop(&quiet, 0.1), "too little time");
        assert!(r.should_stop(&quiet, 1.0));
        assert!(!r.should_stop(&timings(100.0, 0.2, 20, 2), 1.0), "noisy");
        assert!(
            r.should_stop(&timings(100.0, 0.2, 20, 2), 10.0),
            "time limit"
        );
    }

    #[test]
    fn bootstrap_is_reproducible_and_covers_the_truth() {
        let b = timings(100.0, 0.02, 30, 3);
        let c = timings(90.0, 0.02, 30, 4);
        let i1 = bootstrap_median_ratio(&b, &c, 2000, 0.95, 7).unwrap();
        let i2 = bootstrap_median_ratio(&b, &c, 2000, 0.95, 7).unwrap();
        assert_eq!(i1, i2, "seeded");
        assert!(i1.low < 0.9 && 0.9 < i1.high, "{i1:?}");
        assert!(i1.high < 0.95);
    }
}
