//! What a GPU can plausibly be. An input (a trace's device record, Kineto's
//! `deviceProperties`, a stored report) is anyone's text: a 1e-297 Hz clock,
//! 0 SMs or a 100 KB name must not reach a report as fact. The ranges are
//! wide, a hundredfold past today's largest accelerators either way, so
//! only values no GPU could have fall outside.

use std::ops::RangeInclusive;

use crate::Device;

/// Longest device name: NVIDIA's and AMD's names run to about 40.
pub const DEVICE_NAME_MAX_CHARS: usize = 128;
/// SMs (NVIDIA) or CUs (AMD): 304 on an MI300X.
pub const SM_COUNT: RangeInclusive<u32> = 1..=1024;
/// SM or engine clock, Hz: 100 MHz to 10 GHz.
pub const SM_CLOCK_HZ: RangeInclusive<f64> = 1e8..=1e10;
/// Memory clock, Hz: 10 MHz to 100 GHz (GDDR's effective rates included).
pub const MEM_CLOCK_HZ: RangeInclusive<f64> = 1e7..=1e11;
/// Memory bus width, bits.
pub const MEM_BUS_WIDTH_BITS: RangeInclusive<u32> = 8..=65536;
/// L2 (or last-level) cache, bytes: 1 KiB to 64 GiB.
pub const L2_BYTES: RangeInclusive<u64> = 1 << 10..=1 << 36;
/// Device memory, bytes: 16 MiB to 64 TiB.
pub const MEMORY_BYTES: RangeInclusive<u64> = 1 << 24..=1 << 46;
/// DRAM bandwidth, bytes/s: 1 GB/s to 100 TB/s (an H200 has 4.8 TB/s).
pub const DRAM_BYTES_PER_S: RangeInclusive<f64> = 1e9..=1e14;
/// FP32 rate, FLOP/s: 1 GFLOP/s to 10 PFLOP/s (a B200 has 80 TFLOP/s).
pub const FP32_FLOPS: RangeInclusive<f64> = 1e9..=1e16;
/// Dense bf16/fp16 tensor rate, FLOP/s: 1 GFLOP/s to 100 PFLOP/s.
pub const TENSOR_FLOPS: RangeInclusive<f64> = 1e9..=1e17;

/// A figure outside `range`, said as "FIELD = VALUE UNIT (RANGE)".
fn outside<T: PartialOrd + std::fmt::Display>(
    field: &str,
    v: T,
    range: &RangeInclusive<T>,
    unit: &str,
    scientific: bool,
) -> Option<String> {
    if range.contains(&v) {
        return None;
    }
    let shown = |x: &T| {
        let text = x.to_string();
        match text.parse::<f64>() {
            Ok(f) if f != 0.0 && (scientific || !(1e-3..1e9).contains(&f.abs())) => {
                format!("{f:e}")
            }
            _ => text,
        }
    };
    Some(format!(
        "{field} = {}{unit}: outside {} to {}",
        shown(&v),
        shown(range.start()),
        shown(range.end())
    ))
}

/// A float figure: NaN and infinities are outside every range.
fn outside_f64(field: &str, v: f64, range: &RangeInclusive<f64>, unit: &str) -> Option<String> {
    if v.is_nan() {
        return Some(format!("{field} = NaN{unit}: not a number"));
    }
    outside(field, v, range, unit, true)
}

impl Device {
    /// Leaves unknown each figure no GPU could have (outside the ranges of
    /// [`crate::device_limits`]), a name past [`DEVICE_NAME_MAX_CHARS`] or
    /// holding control characters becoming "unknown GPU", and a compute
    /// capability that is not `MAJOR.MINOR`; returns what was left out,
    /// one "field = value: why" each.
    pub fn leave_out_implausible(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let chars = self.name.chars().count();
        if chars > DEVICE_NAME_MAX_CHARS || self.name.chars().any(char::is_control) {
            out.push(format!(
                "name of {chars} characters: not a GPU's name (at most {DEVICE_NAME_MAX_CHARS}, no control characters)"
            ));
            self.name = Device::unknown().name;
        }
        if let Some(cc) = &self.compute_capability {
            let well_formed = cc.split_once('.').is_some_and(|(a, b)| {
                [a, b]
                    .iter()
                    .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_digit()))
            });
            if !well_formed {
                out.push(format!(
                    "compute_capability = {}: not MAJOR.MINOR",
                    crate::text::echo(cc)
                ));
                self.compute_capability = None;
            }
        }
        if let Some(why) = self
            .sm_count
            .and_then(|v| outside("sm_count", v, &SM_COUNT, "", false))
        {
            out.push(why);
            self.sm_count = None;
        }
        if let Some(why) = self
            .mem_bus_width_bits
            .and_then(|v| outside("mem_bus_width_bits", v, &MEM_BUS_WIDTH_BITS, "", false))
        {
            out.push(why);
            self.mem_bus_width_bits = None;
        }
        for (field, slot, range) in [
            ("l2_bytes", &mut self.l2_bytes, &L2_BYTES),
            ("memory_bytes", &mut self.memory_bytes, &MEMORY_BYTES),
        ] {
            if let Some(why) = slot.and_then(|v| outside(field, v, range, " bytes", false)) {
                out.push(why);
                *slot = None;
            }
        }
        for (field, slot, range, unit) in [
            ("sm_clock_hz", &mut self.sm_clock_hz, &SM_CLOCK_HZ, " Hz"),
            ("mem_clock_hz", &mut self.mem_clock_hz, &MEM_CLOCK_HZ, " Hz"),
            (
                "peaks.dram_bytes_per_s",
                &mut self.peaks.dram_bytes_per_s,
                &DRAM_BYTES_PER_S,
                " bytes/s",
            ),
            (
                "peaks.fp32_flops",
                &mut self.peaks.fp32_flops,
                &FP32_FLOPS,
                " FLOP/s",
            ),
            (
                "peaks.tensor_bf16_flops",
                &mut self.peaks.tensor_bf16_flops,
                &TENSOR_FLOPS,
                " FLOP/s",
            ),
        ] {
            if let Some(why) = slot.and_then(|v| outside_f64(field, v, range, unit)) {
                out.push(why);
                *slot = None;
            }
        }
        out
    }

    /// What [`Device::leave_out_implausible`] would leave out, the device
    /// unchanged (a stored report is refused for it, not altered).
    pub fn implausible(&self) -> Vec<String> {
        self.clone().leave_out_implausible()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Device {
        let mut d = Device::unknown();
        d.name = "NVIDIA H100 80GB HBM3".into();
        d.compute_capability = Some("9.0".into());
        d.sm_count = Some(132);
        d.sm_clock_hz = Some(1.98e9);
        d.resolve_peaks();
        d
    }

    #[test]
    fn a_real_device_is_left_as_it_is() {
        let mut d = h100();
        let before = d.clone();
        assert_eq!(d.leave_out_implausible(), Vec::<String>::new());
        assert_eq!(d, before);
    }

    /// A sixth hostile round (L3): a 1e-297 Hz clock, 0 SMs and a 100 KB
    /// name reached the JSON report as the device.
    #[test]
    fn figures_no_gpu_has_are_left_unknown_and_named() {
        let mut d = h100();
        d.sm_clock_hz = Some(1e-297);
        d.sm_count = Some(0);
        d.name = "X".repeat(100_000);
        d.compute_capability = Some("9".repeat(5000));
        d.peaks.dram_bytes_per_s = Some(f64::INFINITY);
        d.l2_bytes = Some(u64::MAX);
        let left = d.leave_out_implausible();
        let all = left.join("\n");
        for field in [
            "name of 100000 characters",
            "sm_clock_hz = 1e-297 Hz",
            "sm_count = 0: outside 1 to 1024",
            "compute_capability",
            "peaks.dram_bytes_per_s = inf",
            "l2_bytes = 1.8446744073709552e19 bytes",
        ] {
            assert!(all.contains(field), "{field}: {all}");
        }
        assert!(all.len() < 2000, "the name is not echoed whole: {all}");
        assert_eq!(d.name, "unknown GPU");
        assert_eq!((d.sm_clock_hz, d.sm_count, d.l2_bytes), (None, None, None));
        assert_eq!(d.peaks.dram_bytes_per_s, None);
        // What is left is plausible.
        assert!(d.implausible().is_empty());
    }
}
