//! Where each kernel sits on a roofline, and which kernels get a point:
//! decided here, from the diagnosis's figures; kopt-report only draws it.

use kopt_model::{BottleneckClass, Diagnosis, KernelVerdict, Peaks};

/// At most this many kernels (by time) get a point.
pub const PLOTTED_KERNELS_MAX: usize = 100;

/// A kernel's roofline coordinates before any chart clamps them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RooflineFigures {
    /// Achieved FLOP/s: the FP32 instructions counted, plus tensor work
    /// estimated from the pipe's busy share of the device's bf16 peak
    /// (kopt's metrics do not count tensor FLOPs).
    pub flops_per_s: f64,
    /// DRAM bytes per second.
    pub dram_bytes_per_s: f64,
}

impl RooflineFigures {
    /// FLOP per DRAM byte of the rates above. Unlike the table's
    /// `arithmetic_intensity` (FP32 FLOPs counted over bytes counted), it
    /// includes the tensor estimate, so a point sits under the roof its
    /// rate reaches. `None` without FLOPs or without DRAM traffic.
    pub fn flop_per_byte(&self) -> Option<f64> {
        (self.flops_per_s > 0.0 && self.dram_bytes_per_s > 0.0)
            .then(|| self.flops_per_s / self.dram_bytes_per_s)
    }
}

/// The roofline figures of one kernel on a device with `peaks`.
pub fn figures(k: &KernelVerdict, peaks: &Peaks) -> RooflineFigures {
    let tensor_rate = match (k.tensor_pct, peaks.tensor_bf16_flops) {
        // Below 1% the pipe is idle: no tensor work to stand for.
        (Some(p), Some(peak)) if p >= 1.0 => p / 100.0 * peak,
        _ => 0.0,
    };
    RooflineFigures {
        flops_per_s: k.fp32_flops_per_s.unwrap_or(0.0) + tensor_rate,
        dram_bytes_per_s: k.dram_bytes_per_s.unwrap_or(0.0),
    }
}

/// True when a kernel has the counters a roofline point needs (a trace
/// alone gives times, and a class from them, but no rates).
pub fn has_counters(k: &KernelVerdict) -> bool {
    k.bottleneck.class != BottleneckClass::Unknown
        && (k.fp32_flops_per_s.is_some()
            || k.dram_bytes_per_s.is_some()
            || k.tensor_pct.is_some()
            || k.memory_sol_pct.is_some()
            || k.compute_sol_pct.is_some())
}

/// True when a kernel has a place on the log-log chart: FLOPs and DRAM
/// bytes both counted, so an arithmetic intensity and a rate. A copy (no
/// FLOPs), a kernel served from cache (no DRAM bytes) or counters without
/// FLOPs (rocprof's usual set) have none: drawn at an edge they would pile
/// up on the axis as if measured there.
pub fn has_intensity(k: &KernelVerdict, peaks: &Peaks) -> bool {
    figures(k, peaks).flop_per_byte().is_some()
}

/// The kernels that get a point: those with counters and an intensity,
/// hottest first (the diagnosis's order), at most [`PLOTTED_KERNELS_MAX`].
pub fn plotted_kernels(d: &Diagnosis) -> Vec<&KernelVerdict> {
    d.kernels
        .iter()
        .filter(|k| has_counters(k) && has_intensity(k, &d.device.peaks))
        .take(PLOTTED_KERNELS_MAX)
        .collect()
}

/// Kernels with counters but no intensity, hottest first: named beside the
/// chart instead of drawn on it.
pub fn unplotted_kernels(d: &Diagnosis) -> Vec<&KernelVerdict> {
    d.kernels
        .iter()
        .filter(|k| has_counters(k) && !has_intensity(k, &d.device.peaks))
        .collect()
}
