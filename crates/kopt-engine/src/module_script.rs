//! Module scripts: kopt-collect drives them (`kopt_collect::module_script`,
//! its Python beside it); here they are prepared with failures in the
//! engine's error kinds.

use std::path::{Path, PathBuf};

pub use kopt_collect::module_script::{
    driven_script, is_module_script, optimize_harness_source, without_op_ranges, PreparedScript,
};

use crate::error::Result;

/// Copy `text` into `run_dir` as `<module>.py`; for a module script, write
/// kopt's driver beside it and run that (`warmup` then `steps` passes, each
/// an NVTX step; with `record_ops`, PyTorch's op ranges with input shapes
/// too). See `kopt_collect::module_script::prepare`.
pub fn prepare(
    run_dir: &Path,
    text: &str,
    module: &str,
    python: &str,
    warmup: u32,
    steps: u32,
    record_ops: bool,
) -> Result<PreparedScript> {
    Ok(kopt_collect::module_script::prepare(
        run_dir, text, module, python, warmup, steps, record_ops,
    )?)
}

/// The driver's command for `kopt optimize`'s kept result (`variant`, a
/// candidate or a stack) on a prepared module script. See
/// `kopt_collect::module_script::variant_argv`.
pub fn variant_argv(
    dir: &Path,
    script: &Path,
    module: &str,
    python: &str,
    variant: &str,
    warmup: u32,
    steps: u32,
) -> Result<Vec<String>> {
    Ok(kopt_collect::module_script::variant_argv(
        dir, script, module, python, variant, warmup, steps,
    )?)
}

/// The loader and the optimize harness in `dir`; returns the harness path.
pub(crate) fn write_harness(dir: &Path) -> Result<PathBuf> {
    Ok(kopt_collect::module_script::write_harness(dir)?)
}
