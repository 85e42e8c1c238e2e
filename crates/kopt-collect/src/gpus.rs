//! This host's NVIDIA GPUs, from CUDA_VISIBLE_DEVICES and `nvidia-smi`
//! (run through [`crate::runner::output`]): which are visible and what
//! they are.

use std::path::Path;

/// The GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else
/// every GPU nvidia-smi lists, else none.
pub fn visible_gpus() -> Vec<String> {
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES") {
        let ids: Vec<String> = v
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        return ids;
    }
    nvidia_smi(&["--query-gpu=index", "--format=csv,noheader"])
        .map(|out| {
            out.lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// What `nvidia-smi ARGS` printed, when it ran and succeeded.
fn nvidia_smi(args: &[&str]) -> Option<String> {
    let out = crate::runner::output(Path::new("nvidia-smi"), args).ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Name and driver of `gpu` (or the first GPU), from nvidia-smi.
pub fn query_device(gpu: Option<&str>) -> (Option<String>, Option<String>) {
    let mut args = vec!["--query-gpu=name,driver_version", "--format=csv,noheader"];
    if let Some(g) = gpu {
        args.extend(["-i", g]);
    }
    let Some(out) = nvidia_smi(&args) else {
        return (None, None);
    };
    let line = out.lines().next().unwrap_or("");
    match line.rsplit_once(',') {
        Some((name, driver)) => (
            Some(name.trim().to_string()).filter(|s| !s.is_empty()),
            Some(driver.trim().to_string()).filter(|s| !s.is_empty()),
        ),
        None => (None, None),
    }
}
