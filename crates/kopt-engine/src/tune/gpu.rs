//! This host's GPUs: which are visible, what they are, and a command
//! pinned to one of them.

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

pub(super) fn nvidia_smi(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
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

/// The shell prefix that pins a command to one GPU.
pub(super) fn on_gpu(gpu: Option<&str>, command: &str) -> String {
    match gpu {
        Some(g) => format!("CUDA_VISIBLE_DEVICES={g}; export CUDA_VISIBLE_DEVICES; {command}"),
        None => command.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_pinned_to_a_gpu() {
        assert_eq!(
            on_gpu(Some("1"), "python3 k.py"),
            "CUDA_VISIBLE_DEVICES=1; export CUDA_VISIBLE_DEVICES; python3 k.py"
        );
    }
}
