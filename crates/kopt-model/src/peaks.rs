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
    // AMD Instinct: one agent as rocprof sees it (an MI250X / MI250 is two
    // GCDs, each its own agent with half the package's figures). Sources in
    // AMD_SPECS below.
    ("MI355X", peaks(8.0e12, 157.3e12, 2516.6e12)),
    ("MI350X", peaks(8.0e12, 144.2e12, 2306.9e12)),
    ("MI325X", peaks(6.0e12, 163.4e12, 1307.4e12)),
    ("MI300X", peaks(5.3e12, 163.4e12, 1307.4e12)),
    ("MI300A", peaks(5.3e12, 122.6e12, 980.6e12)),
    ("MI250X", peaks(1.6384e12, 23.95e12, 191.5e12)),
    ("MI250", peaks(1.6384e12, 22.65e12, 181.05e12)),
];

/// One AMD Instinct part as one rocprof agent sees it. FP32 is AMD's
/// "FP32 vector" figure (packed FP32 counted where AMD counts it: MI300
/// series and later); matrix figures are dense (no sparsity).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AmdSpec {
    /// Matched against the device name (most specific first).
    pub key: &'static str,
    pub name: &'static str,
    pub arch: &'static str,
    pub cus: u32,
    pub max_sclk_mhz: f64,
    pub hbm_bytes_per_s: f64,
    pub fp32_vector_flops: f64,
    /// bf16 / fp16 dense matrix (MFMA) peak.
    pub bf16_matrix_flops: f64,
    pub fp8_matrix_flops: Option<f64>,
    pub lds_bytes_per_cu: u64,
    pub l2_bytes: u64,
    pub l2_channels: u32,
    pub max_waves_per_cu: u32,
    pub xcds: u32,
    pub memory_bytes: u64,
    /// vL1D bytes per clock per CU (rocprof-compute's cache-line factor).
    pub vl1d_bytes_per_clock: u32,
    pub source: &'static str,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// The AMD device table (wave64 on all of them). Where a gfx target and CU
/// count fit two parts (MI300X and MI325X), the first listed is taken.
pub const AMD_SPECS: &[AmdSpec] = &[
    AmdSpec {
        key: "MI355X",
        name: "AMD Instinct MI355X",
        arch: "gfx950",
        cus: 256,
        max_sclk_mhz: 2400.0,
        hbm_bytes_per_s: 8.0e12,
        fp32_vector_flops: 157.3e12,
        bf16_matrix_flops: 2516.6e12,
        fp8_matrix_flops: Some(5033.2e12),
        lds_bytes_per_cu: 160 * KIB,
        l2_bytes: 32 * MIB,
        l2_channels: 128,
        max_waves_per_cu: 32,
        xcds: 8,
        memory_bytes: 288 * GIB,
        vl1d_bytes_per_clock: 128,
        source: "AMD Instinct MI355X product page / data sheet (2025); CDNA 4 white paper (160 KB LDS per CU, 4 MB L2 per XCD)",
    },
    AmdSpec {
        key: "MI350X",
        name: "AMD Instinct MI350X",
        arch: "gfx950",
        cus: 256,
        max_sclk_mhz: 2200.0,
        hbm_bytes_per_s: 8.0e12,
        fp32_vector_flops: 144.2e12,
        bf16_matrix_flops: 2306.9e12,
        fp8_matrix_flops: Some(4613.7e12),
        lds_bytes_per_cu: 160 * KIB,
        l2_bytes: 32 * MIB,
        l2_channels: 128,
        max_waves_per_cu: 32,
        xcds: 8,
        memory_bytes: 288 * GIB,
        vl1d_bytes_per_clock: 128,
        source: "AMD Instinct MI350X product page / data sheet (2025); CDNA 4 white paper",
    },
    AmdSpec {
        key: "MI300X",
        name: "AMD Instinct MI300X",
        arch: "gfx942",
        cus: 304,
        max_sclk_mhz: 2100.0,
        hbm_bytes_per_s: 5.3e12,
        fp32_vector_flops: 163.4e12,
        bf16_matrix_flops: 1307.4e12,
        fp8_matrix_flops: Some(2614.9e12),
        lds_bytes_per_cu: 64 * KIB,
        l2_bytes: 32 * MIB,
        l2_channels: 128,
        max_waves_per_cu: 32,
        xcds: 8,
        memory_bytes: 192 * GIB,
        vl1d_bytes_per_clock: 128,
        source: "AMD Instinct MI300X data sheet (2023); CDNA 3 white paper (4 MB L2 and 16 channels per XCD); rocprof-compute's sysinfo.csv for the vcopy fixture agrees (304 CUs, 2100 MHz, 5324.8 GB/s)",
    },
    AmdSpec {
        key: "MI325X",
        name: "AMD Instinct MI325X",
        arch: "gfx942",
        cus: 304,
        max_sclk_mhz: 2100.0,
        hbm_bytes_per_s: 6.0e12,
        fp32_vector_flops: 163.4e12,
        bf16_matrix_flops: 1307.4e12,
        fp8_matrix_flops: Some(2614.9e12),
        lds_bytes_per_cu: 64 * KIB,
        l2_bytes: 32 * MIB,
        l2_channels: 128,
        max_waves_per_cu: 32,
        xcds: 8,
        memory_bytes: 256 * GIB,
        vl1d_bytes_per_clock: 128,
        source: "AMD Instinct MI325X product page / data sheet (2024); CDNA 3 white paper",
    },
    AmdSpec {
        key: "MI300A",
        name: "AMD Instinct MI300A",
        arch: "gfx942",
        cus: 228,
        max_sclk_mhz: 2100.0,
        hbm_bytes_per_s: 5.3e12,
        fp32_vector_flops: 122.6e12,
        bf16_matrix_flops: 980.6e12,
        fp8_matrix_flops: Some(1961.2e12),
        lds_bytes_per_cu: 64 * KIB,
        l2_bytes: 24 * MIB,
        l2_channels: 96,
        max_waves_per_cu: 32,
        xcds: 6,
        memory_bytes: 128 * GIB,
        vl1d_bytes_per_clock: 128,
        source: "AMD Instinct MI300A data sheet (2023); CDNA 3 white paper",
    },
    AmdSpec {
        key: "MI250X",
        name: "AMD Instinct MI250X (one GCD)",
        arch: "gfx90a",
        cus: 110,
        max_sclk_mhz: 1700.0,
        hbm_bytes_per_s: 1.6384e12,
        fp32_vector_flops: 23.95e12,
        bf16_matrix_flops: 191.5e12,
        fp8_matrix_flops: None,
        lds_bytes_per_cu: 64 * KIB,
        l2_bytes: 8 * MIB,
        l2_channels: 32,
        max_waves_per_cu: 32,
        xcds: 1,
        memory_bytes: 64 * GIB,
        vl1d_bytes_per_clock: 64,
        source: "AMD Instinct MI250X data sheet (per GCD: half of 47.9 TF FP32 vector, 383 TF bf16, 3.2768 TB/s); CDNA 2 white paper (8 MB L2, 32 channels per GCD)",
    },
    AmdSpec {
        key: "MI250",
        name: "AMD Instinct MI250 (one GCD)",
        arch: "gfx90a",
        cus: 104,
        max_sclk_mhz: 1700.0,
        hbm_bytes_per_s: 1.6384e12,
        fp32_vector_flops: 22.65e12,
        bf16_matrix_flops: 181.05e12,
        fp8_matrix_flops: None,
        lds_bytes_per_cu: 64 * KIB,
        l2_bytes: 8 * MIB,
        l2_channels: 32,
        max_waves_per_cu: 32,
        xcds: 1,
        memory_bytes: 64 * GIB,
        vl1d_bytes_per_clock: 64,
        source: "AMD Instinct MI250 data sheet (per GCD: half of 45.3 TF FP32 vector, 362.1 TF bf16, 3.2768 TB/s); CDNA 2 white paper",
    },
];

/// The AMD part a device name (or gfx target), CU count and peak engine
/// clock describe. A name may name two parts (rocminfo's `AMD Instinct
/// MI250X/MI250`): the CU count decides; a gfx target alone needs it. Where
/// two parts share the target and CU count (gfx950: MI350X at 2200 MHz,
/// MI355X at 2400 MHz; a family name such as rocprof-compute's `MI350`
/// names both), the clock decides; failing that the first listed is taken.
pub fn amd_spec(
    name: &str,
    cus: Option<u32>,
    max_sclk_mhz: Option<f64>,
) -> Option<&'static AmdSpec> {
    let by_clock = |c: &[&'static AmdSpec]| -> Option<&'static AmdSpec> {
        let mhz = max_sclk_mhz.filter(|v| v.is_finite() && *v > 0.0)?;
        c.iter()
            .copied()
            .find(|s| (s.max_sclk_mhz - mhz).abs() <= s.max_sclk_mhz * 0.01)
    };
    let pick = |c: Vec<&'static AmdSpec>, need_cus: bool| -> Option<&'static AmdSpec> {
        let fits: Vec<&'static AmdSpec> = match cus {
            Some(n) => c.iter().copied().filter(|s| s.cus == n).collect(),
            None if need_cus => return None,
            None => c.clone(),
        };
        if fits.is_empty() {
            // A name that matched, with a CU count of no listed part
            // (a partitioned GPU): the name still decides.
            return if need_cus { None } else { c.first().copied() };
        }
        by_clock(&fits).or(fits.first().copied())
    };
    let upper = name.to_ascii_uppercase();
    let by_name: Vec<&AmdSpec> = AMD_SPECS.iter().filter(|s| upper.contains(s.key)).collect();
    if !by_name.is_empty() {
        return pick(by_name, false);
    }
    let lower = name.to_ascii_lowercase();
    let by_arch: Vec<&AmdSpec> = AMD_SPECS
        .iter()
        .filter(|s| lower.contains(s.arch))
        .collect();
    pick(by_arch, true)
}

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

/// The names kopt has datasheet peaks for (a device name containing one
/// takes its peaks), in the order they are matched.
pub fn datasheet_names() -> impl Iterator<Item = &'static str> {
    DATASHEET.iter().map(|(key, _)| *key)
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
    fn amd_parts_resolve_by_name_and_cu_count() {
        assert_eq!(
            amd_spec("MI300X_A1", Some(304), None).unwrap().key,
            "MI300X"
        );
        assert_eq!(
            amd_spec("AMD Instinct MI300A", None, None).unwrap().cus,
            228
        );
        // rocminfo names both MI250 parts at once: the CU count decides.
        let n = "AMD Instinct MI250X/MI250";
        assert_eq!(amd_spec(n, Some(104), None).unwrap().key, "MI250");
        assert_eq!(amd_spec(n, Some(110), None).unwrap().key, "MI250X");
        assert_eq!(amd_spec("gfx942", Some(304), None).unwrap().key, "MI300X");
        assert_eq!(amd_spec("gfx942", None, None), None);
        assert_eq!(amd_spec("NVIDIA H100", Some(132), None), None);
        // gfx950 at 256 CUs is MI350X or MI355X: the peak clock decides.
        assert_eq!(
            amd_spec("gfx950", Some(256), Some(2200.0)).unwrap().key,
            "MI350X"
        );
        assert_eq!(
            amd_spec("gfx950", Some(256), Some(2400.0)).unwrap().key,
            "MI355X"
        );
        assert_eq!(amd_spec("MI350", Some(256), Some(2200.0)), None);
        assert_eq!(
            amd_spec("MI350X", Some(256), Some(2400.0)).unwrap().key,
            "MI350X"
        );
        for s in AMD_SPECS {
            // FP32 vector: CUs x 64 lanes x 2 (FMA) x clock, doubled where
            // AMD counts packed FP32 (MI300 series and later).
            let plain = s.cus as f64 * 128.0 * s.max_sclk_mhz * 1e6;
            let ratio = s.fp32_vector_flops / plain;
            assert!(
                (ratio - 1.0).abs() < 0.01 || (ratio - 2.0).abs() < 0.02,
                "{}: {ratio}",
                s.key
            );
            let (key, p) = datasheet_peaks(s.name).unwrap();
            assert_eq!(key, s.key);
            assert_eq!(p.dram_bytes_per_s, Some(s.hbm_bytes_per_s));
        }
    }

    #[test]
    fn unknown_device_has_unknown_peaks() {
        let mut d = Device::unknown();
        d.resolve_peaks();
        assert_eq!(d.peak_source, PeakSource::Unknown);
    }
}
