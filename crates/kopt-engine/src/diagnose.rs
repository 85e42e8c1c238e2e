//! A profile diagnosed: the device named or measured peaks applied, then
//! kopt-analyze, then calibration from the history. Every workflow that
//! ends in a diagnosis (`analyze`, `profile` with either profiler, `trace`)
//! comes here last.

use kopt_analyze::AnalyzeOptions;
use kopt_model::{Diagnosis, Peaks, Profile};

use crate::error::{Error, Result};
use crate::record::HistoryDb;

/// How the analysis reads the device: a name for datasheet peaks, measured peaks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnalysisOptions {
    /// Device name for datasheet peaks when the input names none.
    pub device: Option<String>,
    /// Measured peaks (SI units: bytes/s, FLOP/s), overriding the others.
    pub measured_peaks: Peaks,
    /// Show only the N kernels with the most time (all still count).
    pub top: Option<usize>,
    /// Keep warm-up / autotuning trial kernels in the table and totals
    /// (they are left out by default and summarised in one line).
    pub keep_warmup: bool,
    /// A history whose `kopt optimize` runs calibrate the predictions: once a
    /// rule has enough checked predictions, its recommendations quote them.
    pub calibration: HistoryDb,
}

/// Longest `--device` name: NVIDIA's and AMD's names run to about 40.
const MAX_DEVICE_NAME: usize = 128;

impl AnalysisOptions {
    pub fn validate(&self) -> Result<()> {
        if self.top == Some(0) {
            return Err(Error::Usage("--top must be at least 1".into()));
        }
        if self.device.as_deref().is_some_and(|d| d.trim().is_empty()) {
            return Err(Error::Usage("--device needs a name".into()));
        }
        // A name is printed in every report's header: no terminal control,
        // and no page of text.
        if let Some(d) = &self.device {
            if d.chars().count() > MAX_DEVICE_NAME || d.chars().any(char::is_control) {
                return Err(Error::Usage(format!(
                    "--device takes a GPU's name (at most {MAX_DEVICE_NAME} characters, no control characters), got {} characters",
                    d.chars().count()
                )));
            }
        }
        let p = &self.measured_peaks;
        for (name, v) in [
            ("peak-dram-gbs", p.dram_bytes_per_s),
            ("peak-fp32-tflops", p.fp32_flops),
            ("peak-tensor-tflops", p.tensor_bf16_flops),
        ] {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0) {
                    return Err(Error::Usage(format!(
                        "--{name} must be a positive number, got {x}"
                    )));
                }
                // 1e21 per second (a zetta-rate) is far beyond any device;
                // more is a typo, and made the roofline axis infinite.
                if x > 1e21 {
                    return Err(Error::Usage(format!(
                        "--{name} is beyond any device ({x:e} per second, the most is 1e21)"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Device overrides, measured peaks, then the analysis.
pub fn diagnose(mut profile: Profile, opts: &AnalysisOptions) -> Diagnosis {
    // Every workflow's device, however it was read: figures no GPU could
    // have are left unknown and said (ingest's readers do so already; this
    // holds for any path that builds a profile itself).
    let left_out = kopt_ingest::device_left_out(&mut profile.device);
    if let Some(first) = profile.sources.first_mut() {
        first.excluded.extend(left_out);
    }
    if let Some(name) = &opts.device {
        profile.device.name = name.clone();
        profile.device.resolve_peaks();
    }
    profile.device.apply_measured_peaks(&opts.measured_peaks);
    let mut diagnosis = kopt_analyze::analyze(
        &profile,
        &AnalyzeOptions {
            top: opts.top,
            keep_warmup: opts.keep_warmup,
        },
    );
    drop_in_background(profile);
    if let Some(db) = opts.calibration.resolve() {
        crate::history::apply_calibration(&mut diagnosis, &db);
    }
    diagnosis
}

/// Drop a profile off the caller's thread: a large trace's profile is
/// millions of small allocations, and freeing them one by one only delays
/// the report (a CLI exits right after; Python keeps going).
pub(crate) fn drop_in_background(profile: Profile) {
    let _ = std::thread::Builder::new()
        .name("kopt-drop".into())
        .spawn(move || drop(profile));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #39: `--peak-fp32-tflops 1e296` passed (finite after scaling to 1e308)
    /// and made the HTML roofline's axis infinite.
    #[test]
    fn peaks_beyond_any_device_are_refused() {
        for (fp32, ok) in [(1e308, false), (1e296 * 1e12, false), (67e12, true)] {
            let o = AnalysisOptions {
                measured_peaks: Peaks {
                    fp32_flops: Some(fp32),
                    ..Peaks::default()
                },
                ..AnalysisOptions::default()
            };
            let r = o.validate();
            assert_eq!(r.is_ok(), ok, "{fp32}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("--peak-fp32-tflops"), "{e}");
            }
        }
    }
}
