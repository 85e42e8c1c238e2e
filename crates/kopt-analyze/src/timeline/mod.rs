//! Timeline analysis, the same for a Kineto trace and kopt's tracer: wall vs
//! GPU-busy time, idle gaps, host launch cost against kernel duration, and
//! whether launch overhead sets the pace (seed 000's 2.35x came from that).
//!
//! A folder of concerns, each module using only those listed before it:
//! primitives (`stats`, `period`, `launches`, `syncs`), step detection
//! (`steps`), the steady state (`steady`), the window a summary is taken
//! over (`window`), bare timing (`bare`), the graph-capture prediction
//! (`replay`), the summary (`summary`), and what is drawn or handed on
//! from it (`range_time`, `step_profile`, `strip`).

mod bare;
mod launches;
mod period;
mod range_time;
mod replay;
mod stats;
mod steady;
mod step_profile;
mod steps;
mod strip;
mod summary;
mod syncs;
mod window;

#[cfg(test)]
pub(crate) mod synthetic;

pub use period::repeated_period;
pub use range_time::gpu_time_per_range;
pub use steady::{phases, Phase, Phases};
pub use step_profile::step_profile;
pub use steps::{find_steps, Steps};
pub use strip::strip;
pub use summary::{
    step_source_words, summarize, summarize_for_device, summarize_window_for_device,
    summarize_with_replay, COMPUTE_BOUND_BUSY_PCT, LAUNCH_BOUND_BUSY_PCT,
};
pub use window::Window;

pub(crate) use launches::trace_start_ns;
pub(crate) use stats::median;
