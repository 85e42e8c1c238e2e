use serde::{Deserialize, Serialize};

/// Where a device's peak figures came from, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum PeakSource {
    /// Passed by the user (`--peak-dram-gbs` ...), typically measured on the card.
    Measured,
    /// Computed from the device attributes the profiler reported (clocks, bus width, SMs).
    DeviceAttributes,
    /// Looked up in kopt's datasheet table by device name.
    Datasheet(String),
    /// Nothing known: bandwidth and FLOP percentages of peak are not computed.
    Unknown,
}

/// Peak rates used for speed-of-light and roofline figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Peaks {
    /// DRAM bandwidth, bytes/s (read + write).
    pub dram_bytes_per_s: Option<f64>,
    /// FP32 FMA rate, FLOP/s (an FMA counts as two).
    pub fp32_flops: Option<f64>,
    /// Dense bf16/fp16 tensor-core rate, FLOP/s.
    pub tensor_bf16_flops: Option<f64>,
}

/// The GPU a profile came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    pub compute_capability: Option<String>,
    pub sm_count: Option<u32>,
    /// Maximum SM clock, Hz.
    pub sm_clock_hz: Option<f64>,
    /// Memory clock, Hz.
    pub mem_clock_hz: Option<f64>,
    pub mem_bus_width_bits: Option<u32>,
    pub l2_bytes: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub peaks: Peaks,
    pub peak_source: PeakSource,
    /// What replaying one kernel of a captured CUDA graph costs on this card
    /// beyond the kernel's own run time, ns (the graph-capture prediction
    /// adds it per kernel). Filled from [`crate::peaks`]'s table by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_replay_ns_per_kernel: Option<f64>,
}

impl Device {
    pub fn unknown() -> Self {
        Device {
            name: "unknown GPU".into(),
            compute_capability: None,
            sm_count: None,
            sm_clock_hz: None,
            mem_clock_hz: None,
            mem_bus_width_bits: None,
            l2_bytes: None,
            memory_bytes: None,
            peaks: Peaks::default(),
            peak_source: PeakSource::Unknown,
            graph_replay_ns_per_kernel: None,
        }
    }
}
