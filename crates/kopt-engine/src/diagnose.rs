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
        use kopt_model::device_limits::{DRAM_BYTES_PER_S, FP32_FLOPS, TENSOR_FLOPS};
        let p = &self.measured_peaks;
        // Each flag in its own unit (GB/s, TFLOP/s), the range a device can
        // have: 1e-300 GB/s or 1e296 TFLOP/s is a typo, and made the
        // roofline's axis infinite.
        for (name, v, range, scale, unit) in [
            (
                "peak-dram-gbs",
                p.dram_bytes_per_s,
                DRAM_BYTES_PER_S,
                1e9,
                "GB/s",
            ),
            (
                "peak-fp32-tflops",
                p.fp32_flops,
                FP32_FLOPS,
                1e12,
                "TFLOP/s",
            ),
            (
                "peak-tensor-tflops",
                p.tensor_bf16_flops,
                TENSOR_FLOPS,
                1e12,
                "TFLOP/s",
            ),
        ] {
            let Some(x) = v else { continue };
            if !(x.is_finite() && x > 0.0) {
                return Err(Error::Usage(format!(
                    "--{name} must be a positive number, got {x}"
                )));
            }
            if !range.contains(&x) {
                return Err(Error::Usage(format!(
                    "--{name} must be within {} to {} {unit}, the range of any device, got {:e}",
                    range.start() / scale,
                    range.end() / scale,
                    x / scale
                )));
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
    let device_note = opts
        .device
        .as_deref()
        .and_then(|name| name_device(&mut profile.device, name));
    profile.device.apply_measured_peaks(&opts.measured_peaks);
    let mut diagnosis = kopt_analyze::analyze(
        &profile,
        &AnalyzeOptions {
            top: opts.top,
            keep_warmup: opts.keep_warmup,
        },
    );
    diagnosis.notes.extend(device_note);
    drop_in_background(profile);
    if let Some(db) = opts.calibration.resolve() {
        crate::history::apply_calibration(&mut diagnosis, &db);
    }
    diagnosis
}

/// `--device NAME`: a name kopt has datasheet peaks for renames the device
/// and takes them; another names a device the input did not identify, but
/// never replaces one it did: a typo (`--device zzz` over an H100) would
/// drop the identified peaks. Returns the note saying so.
fn name_device(device: &mut kopt_model::Device, name: &str) -> Option<String> {
    let known = kopt_model::datasheet_peaks(name);
    let identified = !device.name.starts_with(&kopt_model::Device::unknown().name);
    // Another vendor's GPU over an identified one would mix two
    // architectures (an H100's 132 SMs and CC 9.0 under MI300X peaks).
    let amd_name = known.as_ref().is_some_and(|(key, _)| key.starts_with("MI"));
    if identified && known.is_some() && amd_name != (device.vendor() == kopt_model::Vendor::Amd) {
        return Some(format!(
            "--device {} is another vendor's GPU than the one the input names, {}: the input's device and its peaks are kept (--device is for inputs that name no GPU)",
            kopt_model::text::echo(name),
            kopt_model::text::echo(&device.name)
        ));
    }
    let known = known.is_some();
    if !known && identified {
        return Some(format!(
            "--device {} is not a GPU kopt has peaks for ({}): the input's device, {}, and its peaks are kept",
            kopt_model::text::echo(name),
            kopt_model::datasheet_names().collect::<Vec<_>>().join(", "),
            kopt_model::text::echo(&device.name)
        ));
    }
    device.name = name.to_string();
    device.resolve_peaks();
    None
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

    /// A sixth hostile round (L6): `--peak-dram-gbs 1e-300` was accepted.
    /// Each peak is checked against the range of any device, in its unit.
    #[test]
    fn peaks_below_any_device_are_refused_with_the_range() {
        let with = |p: Peaks| {
            AnalysisOptions {
                measured_peaks: p,
                ..AnalysisOptions::default()
            }
            .validate()
        };
        let e = with(Peaks {
            dram_bytes_per_s: Some(1e-300 * 1e9),
            ..Peaks::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--peak-dram-gbs must be within 1 to 100000 GB/s") && e.contains("1e-300"),
            "{e}"
        );
        assert!(with(Peaks {
            dram_bytes_per_s: Some(3.35e12),
            fp32_flops: Some(67e12),
            tensor_bf16_flops: Some(989e12),
        })
        .is_ok());
    }

    /// L6: `--device zzz` renamed an identified H100 and dropped its bf16
    /// peak. A name kopt has no peaks for keeps the identified device; a
    /// known one renames it; an unidentified device takes any name.
    #[test]
    fn an_unknown_device_name_keeps_the_identified_device() {
        let mut h100 = kopt_model::Device::unknown();
        h100.name = "NVIDIA H100 80GB HBM3".into();
        h100.resolve_peaks();
        let before = h100.clone();
        let note = name_device(&mut h100, "zzz").expect("said");
        assert_eq!(h100, before);
        assert!(
            note.contains("--device zzz")
                && note.contains("NVIDIA H100 80GB HBM3, and its peaks are kept"),
            "{note}"
        );
        assert_eq!(name_device(&mut h100, "NVIDIA H200"), None);
        assert_eq!(h100.name, "NVIDIA H200");
        // Round seven: an AMD name over an identified NVIDIA GPU.
        let before = h100.clone();
        let note = name_device(&mut h100, "MI300X").expect("said");
        assert_eq!(h100, before);
        assert!(note.contains("another vendor's GPU"), "{note}");
        let mut unknown = kopt_model::Device::unknown();
        assert_eq!(name_device(&mut unknown, "my card"), None);
        assert_eq!(unknown.name, "my card");
    }

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
