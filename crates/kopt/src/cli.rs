//! The command line as clap sees it. Validation that clap cannot express
//! lives in `options`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "kopt",
    version,
    about = "Profile-guided GPU kernel optimization: where the time goes, why each hot kernel is slow, what to change first"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose existing profiler output: Nsight Compute CSV (raw or details page) or a .ncu-rep report
    Analyze(AnalyzeArgs),
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Profiler output files: `ncu --csv --page raw|details` output, or .ncu-rep (needs ncu)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Output format: term, md, json
    #[arg(long, short = 'f', default_value = "term")]
    pub format: String,

    /// Show only the N kernels with the most time (all still count in the total)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Write the report to FILE instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Nsight Compute binary used to read .ncu-rep files
    #[arg(long, value_name = "PATH")]
    pub ncu: Option<PathBuf>,

    /// Device name for datasheet peaks when the input names none (e.g. "H100 PCIe")
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,

    /// Measured DRAM bandwidth in GB/s (overrides attribute and datasheet peaks)
    #[arg(long, value_name = "GB/S")]
    pub peak_dram_gbs: Option<f64>,

    /// Measured FP32 peak in TFLOP/s
    #[arg(long, value_name = "TFLOP/S")]
    pub peak_fp32_tflops: Option<f64>,

    /// Measured dense bf16 tensor-core peak in TFLOP/s
    #[arg(long, value_name = "TFLOP/S")]
    pub peak_tensor_tflops: Option<f64>,

    /// Width of the terminal table (default: the terminal's)
    #[arg(long, value_name = "COLUMNS")]
    pub width: Option<u16>,
}
