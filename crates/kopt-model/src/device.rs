use serde::{Deserialize, Serialize};

/// Where a device's peak figures came from, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// adds it per kernel). Filled from `peaks`'s table by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_replay_ns_per_kernel: Option<f64>,
    /// What an AMD Instinct GPU adds to the model (wavefronts, LDS, XCDs,
    /// matrix peaks); `None` for NVIDIA devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amd: Option<AmdDevice>,
}

/// The AMD-specific part of a device: what rocprof-compute's formulas need
/// beyond CUs (`sm_count`) and the engine clock (`sm_clock_hz`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AmdDevice {
    /// The name the profiler printed (`MI300X_A1`, `AMD Instinct MI250X/MI250`).
    pub product: String,
    /// The gfx target (`gfx90a`, `gfx942`, `gfx950`).
    pub arch: Option<String>,
    /// Threads per wavefront (64 on CDNA).
    pub wave_size: u32,
    /// LDS per CU, bytes.
    pub lds_bytes_per_cu: Option<u64>,
    pub max_waves_per_cu: Option<u32>,
    /// Accelerator complex dies (8 on MI300X): GRBM_GUI_ACTIVE counts on each.
    pub xcds: Option<u32>,
    /// L2 channels over the whole device (128 on MI300X).
    pub l2_channels: Option<u32>,
    /// vL1D bytes per clock per CU (the cache line rocprof-compute counts: 64 on gfx90a, 128 on gfx942+).
    pub vl1d_bytes_per_clock: Option<u32>,
    /// Dense fp8 matrix peak, FLOP/s (MI300 series and later).
    pub fp8_flops: Option<f64>,
    /// Where the figures came from (file fields, datasheet).
    pub source: String,
}

/// Whose GPU a profile describes: decides the words a report uses for its
/// compute units and for the tools that profile it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Nvidia,
    Amd,
}

impl Vendor {
    /// The GPU's compute units, plural: "SMs" or "CUs".
    pub fn units(self) -> &'static str {
        match self {
            Vendor::Nvidia => "SMs",
            Vendor::Amd => "CUs",
        }
    }

    /// What collects counters and, while it does, serialises the kernels.
    pub fn counter_profiler(self) -> &'static str {
        match self {
            Vendor::Nvidia => "ncu",
            Vendor::Amd => "rocprofv3's counter collection",
        }
    }

    /// The kopt command that profiles this GPU.
    pub fn profile_command(self) -> &'static str {
        match self {
            Vendor::Nvidia => "kopt profile",
            Vendor::Amd => "kopt profile --backend rocprof",
        }
    }

    /// Collecting kopt's counters by hand.
    pub fn manual_counters(self) -> &'static str {
        match self {
            Vendor::Nvidia => "ncu with kopt's metric list",
            Vendor::Amd => "rocprofv3 --pmc with kopt's counter groups",
        }
    }

    /// What records a timeline (launch gaps, host cost) on this GPU.
    pub fn timeline_tools(self) -> &'static str {
        match self {
            Vendor::Nvidia => "kopt trace, torch.profiler",
            Vendor::Amd => "rocprofv3 --kernel-trace --hip-runtime-trace, torch.profiler",
        }
    }
}

impl Device {
    /// AMD when the device carries an AMD description, else NVIDIA.
    pub fn vendor(&self) -> Vendor {
        if self.amd.is_some() {
            Vendor::Amd
        } else {
            Vendor::Nvidia
        }
    }

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
            amd: None,
        }
    }
}
