//! Peak rates: from device attributes where they determine them, from a small
//! datasheet table otherwise. Pure functions, no I/O.

use crate::{Device, PeakSource, Peaks};

/// Datasheet peaks (dense, no sparsity) by a substring of the device name.
/// More specific names come first.
const DATASHEET: &[(&str, Peaks)] = &[
    ("H200", peaks(4.8e12, 67.0e12, 989.0e12)),
    ("H100 PCIe", peaks(2.0e12, 51.0e12, 756.0e12)),
    ("H100 NVL", peaks(3.9e12, 60.0e12, 835.0e12)),
    ("H100", peaks(3.35e12, 67.0e12, 989.0e12)),
    ("A100-SXM4-80GB", peaks(2.039e12, 19.5e12, 312.0e12)),
    ("A100 80GB", peaks(2.039e12, 19.5e12, 312.0e12)),
    ("A100", peaks(1.555e12, 19.5e12, 312.0e12)),
    ("L4", peaks(0.3e12, 30.3e12, 121.0e12)),
    ("MI300X", peaks(5.3e12, 163.4e12, 1307.0e12)),
];

const fn peaks(dram: f64, fp32: f64, tensor: f64) -> Peaks {
    Peaks {
        dram_bytes_per_s: Some(dram),
        fp32_flops: Some(fp32),
        tensor_bf16_flops: Some(tensor),
    }
}

/// Per-kernel cost of replaying a captured CUDA graph, ns, by a substring of
/// the device name: the GPU-side gap between consecutive kernels of one graph
/// plus the graph launch spread over its kernels.
///
/// Measured on an H200 (2026-11-26, `scripts/checks/predictions/run.sh`:
/// CUDA-graph replay time per step less the GPU-busy time per step, per
/// kernel, on three PyTorch steps: MoE routing 390 ns, 6-layer MLP 300 ns,
/// 4-block decode 430 ns). The H100 (the same Hopper front end) is assumed
/// equal until measured.
const GRAPH_REPLAY_NS_PER_KERNEL: &[(&str, f64)] = &[("H200", 400.0), ("H100", 400.0)];

/// Used for cards the table does not name (the Hopper figure).
pub const DEFAULT_GRAPH_REPLAY_NS_PER_KERNEL: f64 = 400.0;

/// The graph-replay cost per kernel for a device name, and whether it came
/// from the per-card table (false: the default for cards it does not name).
pub fn graph_replay_ns_per_kernel(device_name: &str) -> (f64, bool) {
    GRAPH_REPLAY_NS_PER_KERNEL
        .iter()
        .find(|(key, _)| device_name.contains(key))
        .map_or((DEFAULT_GRAPH_REPLAY_NS_PER_KERNEL, false), |(_, ns)| {
            (*ns, true)
        })
}

/// The datasheet entry whose key the device name contains.
pub fn datasheet_peaks(device_name: &str) -> Option<(&'static str, Peaks)> {
    DATASHEET
        .iter()
        .find(|(key, _)| device_name.contains(key))
        .map(|(key, p)| (*key, p.clone()))
}

/// FP32 lanes per SM by compute capability (CUDA programming guide, arithmetic throughput table).
fn fp32_lanes_per_sm(cc: &str) -> Option<f64> {
    let major: u32 = cc.split('.').next()?.parse().ok()?;
    let minor: u32 = cc
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    match (major, minor) {
        (7, _) => Some(64.0),
        (8, 0) => Some(64.0),
        (8, _) | (9, _) | (10, _) | (12, _) => Some(128.0),
        _ => None,
    }
}

impl Device {
    /// DRAM bandwidth implied by memory clock and bus width (double data rate).
    pub fn dram_peak_from_attributes(&self) -> Option<f64> {
        let clock = self.mem_clock_hz?;
        let width = self.mem_bus_width_bits? as f64;
        Some(clock * 2.0 * width / 8.0)
    }

    /// FP32 peak implied by SM count, clock and lanes per SM.
    pub fn fp32_peak_from_attributes(&self) -> Option<f64> {
        let lanes = fp32_lanes_per_sm(self.compute_capability.as_deref()?)?;
        Some(self.sm_count? as f64 * lanes * 2.0 * self.sm_clock_hz?)
    }

    /// Fill `peaks` from attributes, cross-checked against the datasheet:
    /// HBM parts agree within a few percent; where they disagree by more than
    /// 25% (GDDR parts report clocks differently) the datasheet wins.
    pub fn resolve_peaks(&mut self) {
        let (replay, known) = graph_replay_ns_per_kernel(&self.name);
        self.graph_replay_ns_per_kernel = known.then_some(replay);
        let sheet = datasheet_peaks(&self.name);
        let dram_attr = self.dram_peak_from_attributes();
        let fp32_attr = self.fp32_peak_from_attributes();
        let agrees = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a / b - 1.0).abs() <= 0.25,
            (Some(_), None) => true,
            _ => false,
        };
        let sheet_peaks = sheet.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
        let dram_ok = agrees(dram_attr, sheet_peaks.dram_bytes_per_s);
        let fp32_ok = agrees(fp32_attr, sheet_peaks.fp32_flops);
        if dram_ok && dram_attr.is_some() {
            self.peaks = Peaks {
                dram_bytes_per_s: dram_attr,
                fp32_flops: if fp32_ok {
                    fp32_attr
                } else {
                    sheet_peaks.fp32_flops
                },
                tensor_bf16_flops: sheet_peaks.tensor_bf16_flops,
            };
            self.peak_source = PeakSource::DeviceAttributes;
        } else if let Some((key, p)) = sheet {
            self.peaks = p;
            self.peak_source = PeakSource::Datasheet(key.to_string());
        } else {
            self.peaks = Peaks {
                dram_bytes_per_s: dram_attr,
                fp32_flops: fp32_attr,
                tensor_bf16_flops: None,
            };
            self.peak_source = if dram_attr.is_some() || fp32_attr.is_some() {
                PeakSource::DeviceAttributes
            } else {
                PeakSource::Unknown
            };
        }
    }

    /// Replace peaks with figures the user measured; fields left `None` keep their value.
    pub fn apply_measured_peaks(&mut self, measured: &Peaks) {
        let mut changed = false;
        for (dst, src) in [
            (&mut self.peaks.dram_bytes_per_s, measured.dram_bytes_per_s),
            (&mut self.peaks.fp32_flops, measured.fp32_flops),
            (
                &mut self.peaks.tensor_bf16_flops,
                measured.tensor_bf16_flops,
            ),
        ] {
            if src.is_some() {
                *dst = src;
                changed = true;
            }
        }
        if changed {
            self.peak_source = PeakSource::Measured;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Device {
        Device {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: Some("9.0".into()),
            sm_count: Some(132),
            sm_clock_hz: Some(1.98e9),
            mem_clock_hz: Some(2.619e9),
            mem_bus_width_bits: Some(5120),
            ..Device::unknown()
        }
    }

    #[test]
    fn h100_peaks_come_from_attributes_and_match_the_datasheet() {
        let mut d = h100();
        d.resolve_peaks();
        assert_eq!(d.peak_source, PeakSource::DeviceAttributes);
        let dram = d.peaks.dram_bytes_per_s.unwrap();
        assert!((dram - 3.352e12).abs() < 0.01e12, "{dram}");
        let fp32 = d.peaks.fp32_flops.unwrap();
        assert!((fp32 - 66.9e12).abs() < 0.1e12, "{fp32}");
        assert_eq!(d.peaks.tensor_bf16_flops, Some(989.0e12));
    }

    #[test]
    fn gddr_clock_disagreeing_with_the_datasheet_falls_back_to_it() {
        let mut d = Device {
            name: "NVIDIA L4".into(),
            compute_capability: Some("8.9".into()),
            mem_clock_hz: Some(10.001e9),
            mem_bus_width_bits: Some(192),
            ..Device::unknown()
        };
        d.resolve_peaks();
        assert_eq!(d.peak_source, PeakSource::Datasheet("L4".into()));
        assert_eq!(d.peaks.dram_bytes_per_s, Some(0.3e12));
    }

    #[test]
    fn measured_peaks_override() {
        let mut d = h100();
        d.resolve_peaks();
        d.apply_measured_peaks(&Peaks {
            dram_bytes_per_s: Some(3.0e12),
            ..Peaks::default()
        });
        assert_eq!(d.peak_source, PeakSource::Measured);
        assert_eq!(d.peaks.dram_bytes_per_s, Some(3.0e12));
        assert!(d.peaks.fp32_flops.is_some());
    }

    #[test]
    fn hopper_cards_carry_a_graph_replay_cost() {
        let mut d = h100();
        d.resolve_peaks();
        assert_eq!(d.graph_replay_ns_per_kernel, Some(400.0));
        assert_eq!(
            graph_replay_ns_per_kernel("NVIDIA L4"),
            (DEFAULT_GRAPH_REPLAY_NS_PER_KERNEL, false)
        );
    }

    #[test]
    fn unknown_device_has_unknown_peaks() {
        let mut d = Device::unknown();
        d.resolve_peaks();
        assert_eq!(d.peak_source, PeakSource::Unknown);
    }
}
