//! A timeline: what ran on the GPU and what the CPU called to make it run,
//! in integer nanoseconds (from a Kineto / torch.profiler trace or kopt's tracer).

use serde::Serialize;

use crate::Dim3;

/// What kind of GPU activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityKind {
    Kernel,
    Memcpy,
    Memset,
}

/// One interval of GPU work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuActivity {
    pub kind: ActivityKind,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub device: u32,
    pub stream: u64,
    /// Links the activity to the API call that launched it.
    pub correlation: u64,
    pub grid: Option<Dim3>,
    pub block: Option<Dim3>,
    pub bytes: Option<u64>,
}

impl GpuActivity {
    pub fn duration_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }
}

/// What a host API call did, as far as the timeline analysis cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    /// cudaLaunchKernel, cuLaunchKernel(Ex), cudaLaunchCooperativeKernel, ...
    KernelLaunch,
    /// cudaGraphLaunch / cuGraphLaunch.
    GraphLaunch,
    /// cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, ...
    Synchronize,
    /// cudaMemcpy*, cudaMemset*.
    Memory,
    Other,
}

impl ApiKind {
    pub fn of(name: &str) -> ApiKind {
        let n = name.to_ascii_lowercase();
        if n.contains("graphlaunch") {
            ApiKind::GraphLaunch
        } else if n.contains("launchkernel")
            || n.contains("launchcooperativekernel")
            || n == "culaunchgrid"
        {
            ApiKind::KernelLaunch
        } else if n.contains("synchronize") {
            ApiKind::Synchronize
        } else if n.contains("memcpy") || n.contains("memset") {
            ApiKind::Memory
        } else {
            ApiKind::Other
        }
    }
}

/// One host-side CUDA API call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiCall {
    pub kind: ApiKind,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub thread: u64,
    pub correlation: u64,
}

/// A user annotation (torch `ProfilerStep#N`, NVTX range).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// Everything a trace holds that kopt uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timeline {
    pub activities: Vec<GpuActivity>,
    pub api_calls: Vec<ApiCall>,
    pub ranges: Vec<Range>,
    /// Device name from the trace's metadata, if any.
    pub device_name: Option<String>,
    pub sm_count: Option<u32>,
    /// True when the trace covers the whole program (kopt's tracer), set-up
    /// and first step included; a torch.profiler trace covers what the user chose.
    pub whole_program: bool,
}
