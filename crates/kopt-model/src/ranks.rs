//! A distributed job's ranks: which trace is which rank, and what kopt
//! concludes across them (communication, overlap, stragglers, fixes).

use serde::{Deserialize, Serialize};

use crate::PredictedSpeedup;

/// One process's place in a distributed job, as its trace recorded it
/// (torch.profiler's `distributedInfo`, the tracer's launcher variables)
/// or as its file name says (`rank3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankInfo {
    pub rank: u32,
    /// None when only the file name gave the rank.
    pub world_size: Option<u32>,
}

/// A collective operation, from the NCCL (or RCCL) kernel that ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    AllReduce,
    ReduceScatter,
    AllGather,
    Broadcast,
    Reduce,
    AllToAll,
    SendRecv,
    Other,
}

impl CollectiveOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CollectiveOp::AllReduce => "all_reduce",
            CollectiveOp::ReduceScatter => "reduce_scatter",
            CollectiveOp::AllGather => "all_gather",
            CollectiveOp::Broadcast => "broadcast",
            CollectiveOp::Reduce => "reduce",
            CollectiveOp::AllToAll => "all_to_all",
            CollectiveOp::SendRecv => "send_recv",
            CollectiveOp::Other => "other",
        }
    }
}

/// Where one rank's GPU time went over the analysed window (HTA's temporal
/// breakdown and overlap, on kopt's own reading of the trace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankRow {
    pub rank: u32,
    /// The trace file this rank came from.
    pub source: String,
    /// First kernel start to last kernel end, ns.
    pub span_ns: i64,
    /// Steps found (`ProfilerStep#N`, NVTX steps), and their median, ns.
    pub steps: usize,
    pub step_ns: Option<f64>,
    /// Union of compute kernels (neither communication nor copies), ns.
    pub compute_ns: i64,
    /// Union of communication kernels, ns.
    pub comm_ns: i64,
    /// Union of copies and memsets, ns.
    pub memory_ns: i64,
    /// Communication time with a compute kernel running beside it, ns.
    pub overlapped_comm_ns: i64,
    /// Communication time with no compute beside it: what a step pays.
    pub exposed_comm_ns: i64,
    /// No kernel running at all, ns.
    pub idle_ns: i64,
    /// overlapped / communication, 0..=100 (HTA's overlap percentage).
    pub overlap_pct: f64,
    pub kernels: u64,
    pub collectives: u64,
}

/// One kind of collective on one rank: how many, how long, how fast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CollectiveRow {
    pub op: CollectiveOp,
    /// The element type on the wire (`f32`, `bf16`), when the kernel says.
    pub dtype: Option<String>,
    /// NCCL's algorithm and protocol from the kernel name (`RING_LL`).
    pub algorithm: Option<String>,
    /// Launches on the reference rank, and per step when steps are known.
    pub count: u64,
    pub per_step: Option<f64>,
    pub total_ns: i64,
    /// Message bytes (nccl-tests' size: the output of an all-gather, the
    /// input of the rest); None when the trace holds no sizes.
    pub bytes: Option<u64>,
    pub median_bytes: Option<f64>,
    /// Bus bandwidth (nccl-tests' definition) of the median-size launches'
    /// total, bytes/s: comparable across ops and rank counts.
    pub bus_bytes_per_s: Option<f64>,
}

/// A rank the others waited for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Straggler {
    pub rank: u32,
    /// Share of the matched collectives this rank entered last, 0..=100.
    pub last_arrival_pct: f64,
    /// Median time the other ranks spent waiting for it at a collective, ns.
    pub median_wait_ns: f64,
    /// Its compute time per step over the others' median, ns.
    pub extra_compute_ns: f64,
    /// Its kernel launches over the others' median.
    pub extra_kernels: i64,
    /// The cause in its own timeline, in words.
    pub cause: String,
}

/// A change for the distributed step, ranked by its predicted gain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankAdvice {
    pub rank: usize,
    /// Stable id (`ddp_bucket_size`, `bf16_gradient_compression`, ...).
    pub id: String,
    pub title: String,
    pub evidence: String,
    pub action: String,
    pub predicted_speedup: Option<PredictedSpeedup>,
}

/// The `schema` of a [`RanksDiagnosis`].
pub const RANKS_SCHEMA: &str = "kopt/ranks/1";

/// kopt's reading of a distributed job from its ranks' traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RanksDiagnosis {
    /// `kopt/ranks/1`: this document's format and version.
    pub schema: String,
    pub world_size: u32,
    pub device_name: Option<String>,
    pub ranks: Vec<RankRow>,
    /// The collectives of the slowest rank (the job's step is its step).
    pub collectives: Vec<CollectiveRow>,
    /// Collectives matched across ranks by order (the n-th of each op).
    pub matched_collectives: u64,
    /// Median spread of the ranks' entry times into a matched collective, ns.
    pub median_skew_ns: Option<f64>,
    pub straggler: Option<Straggler>,
    pub recommendations: Vec<RankAdvice>,
    /// What kopt could not see, and what that leaves unknown.
    pub notes: Vec<String>,
}
