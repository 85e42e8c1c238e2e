//! This host's GPUs: which are visible and what they are (kopt-collect
//! asks nvidia-smi), and a command pinned to one of them.

pub use kopt_collect::gpus::{query_device, visible_gpus};

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
